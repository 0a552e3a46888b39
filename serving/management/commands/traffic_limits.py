import json
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError

from serving.traffic import traffic_limits_for, traffic_limits_grant
from tenants.errors import DomainError
from tenants.models import Organization


class Command(BaseCommand):
    help = ("Show an organization's gateway limits, or set them as the platform's operator: above the deployment's "
            "defaults too, which then become the most its own admins may set. Prints the limits as JSON.")

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="the organization's slug")
        for name in ("requests_per_minute", "tokens_per_minute", "max_concurrent"):
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar="N", type=_limit,
                                help="a whole number, or 'default' to follow the deployment's")

    def handle(self, *args, **options):
        org = Organization.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"No organization with the slug {options['org']!r}.")
        changes = {name: value for name in ("requests_per_minute", "tokens_per_minute", "max_concurrent")
                   if (value := options[name]) is not None}
        try:
            limits = (traffic_limits_grant(org=org, changes={name: None if value == "default" else value for name, value in changes.items()})
                      if changes else traffic_limits_for(org=org))
        except DomainError as error:
            raise CommandError(error.message) from None
        self.stdout.write(json.dumps(asdict(limits)))


def _limit(text: str):
    return text if text == "default" else int(text)
