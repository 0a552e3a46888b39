import json

from django.core.management.base import BaseCommand, CommandError

from tenants.data_keys import org_keys_rotate
from tenants.models import Organization


class Command(BaseCommand):
    help = (
        "Rotate data keys while the platform keeps serving: a new key version for each organization, "
        "its content re-encrypted, old versions destroyed, data keys rewrapped under the current master key."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", help="Only this organization (slug); default all.")

    def handle(self, *args, **options):
        orgs = Organization.objects.order_by("slug")
        if options["org"]:
            orgs = orgs.filter(slug=options["org"])
            if not orgs.exists():
                raise CommandError(f"No organization {options['org']!r}.")
        for org in orgs:
            self.stdout.write(json.dumps(org_keys_rotate(org=org)))
