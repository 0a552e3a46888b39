import json

from django.core.management.base import BaseCommand, CommandError

from tenants.errors import DomainError
from tenants.organizations import org_create


class Command(BaseCommand):
    help = 'Create an organization with its owner; print {"org": ..., "api_key": ...} as JSON.'

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--owner-email", required=True)
        parser.add_argument("--training-enabled", action="store_true", help="Opt in to training (off by default).")
        parser.add_argument("--no-store-content", action="store_true", help="Zero-retention mode: never store text.")
        parser.add_argument("--no-redact", action="store_true", help="Store text without redacting secrets and PII.")
        parser.add_argument("--retention-days", type=int, default=30)

    def handle(self, *args, **options):
        policy = {
            "training_enabled": options["training_enabled"],
            "store_content": not options["no_store_content"],
            "redact": not options["no_redact"],
            "retention_days": options["retention_days"],
        }
        try:
            org, api_key = org_create(name=options["name"], owner_email=options["owner_email"], policy=policy)
        except DomainError as error:
            raise CommandError(error.message) from None
        self.stdout.write(json.dumps({"org": org.slug, "api_key": api_key}))
