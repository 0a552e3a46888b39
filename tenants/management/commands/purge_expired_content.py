import json

from django.core.management.base import BaseCommand

from tenants.retention import content_purge_expired_everywhere


class Command(BaseCommand):
    help = "Purge recorded content older than each organization's retention_days (the scheduled task does the same)."

    def handle(self, *args, **options):
        self.stdout.write(json.dumps(content_purge_expired_everywhere()))
