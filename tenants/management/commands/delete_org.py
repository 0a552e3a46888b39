from django.core.management.base import BaseCommand, CommandError

from tenants.models import Organization
from tenants.organizations import org_delete


class Command(BaseCommand):
    help = "Delete an organization: its data keys are destroyed first, then every row of it."

    def add_arguments(self, parser):
        parser.add_argument("org", help="The organization's slug.")

    def handle(self, *args, **options):
        org = Organization.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"No organization {options['org']!r}.")
        org_delete(org=org, confirm_slug=org.slug)  # naming the slug on the command line is the confirmation
        self.stdout.write(f"Deleted {org.slug}; its content can no longer be decrypted.")
