import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from tenants.errors import DomainError
from tenants.invitations import OPERATOR, member_invite
from tenants.models import Organization, Role
from tenants.organizations import Principal


class Command(BaseCommand):
    help = ('Invite a person to an organization\'s console (a new member, or a new link for one: a password reset); '
            'print {"url": ...} as JSON.')

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="the organization's slug")
        parser.add_argument("--email", required=True)
        parser.add_argument("--role", choices=Role.values, help="a new member's role (default viewer)")
        parser.add_argument("--base-url", default=settings.PUBLIC_URL,
                            help="where people reach the web server (default PLATFORM_PUBLIC_URL: %(default)s)")

    def handle(self, *args, **options):
        org = Organization.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"No organization with the slug {options['org']!r}.")
        operator = Principal(org=org, role=Role.OWNER, actor=OPERATOR)
        try:
            _, token = member_invite(org=org, email=options["email"], role=options["role"], by=operator)
        except DomainError as error:
            raise CommandError(error.message) from None
        url = options["base_url"].rstrip("/") + reverse("console:invitation", kwargs={"token": token})
        self.stdout.write(json.dumps({"url": url}))
