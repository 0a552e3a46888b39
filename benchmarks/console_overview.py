"""The console's overview with 100,000 interactions stored: the page's render time and its
plots' data (per hour and served version over 14 days, aggregated in the database), against
the tenant API's first page of interactions in the same run.

    .venv/bin/python benchmarks/console_overview.py [--interactions 100000] [--requests 50] [--json]

The interactions are written in bulk (no text: the overview reads none), spread over the last
14 days across the base model and three adapter versions, each with one feedback event of a
plotted or unplotted type. Requests go through the whole Django stack in process. Uses a fresh
SQLite file, or PostgreSQL when DATABASE_URL is set (point it at a throwaway database).
Target (issue 21): p95 under 300 ms on 2 cores.
"""

import argparse
import json
import random
import uuid
from datetime import timedelta

import _django

_django.setup()

from console_pages import timed  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from tenants.models import FeedbackEvent, Interaction, Membership, feedback_bit  # noqa: E402
from tenants.organizations import org_create  # noqa: E402

FEEDBACK = ["edit_persisted", "edit_accepted", "dissatisfied_followup", "tool_call_invalid", "edit_rejected"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interactions", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    org, key = org_create(name=f"bench-{uuid.uuid4().hex[:6]}", owner_email="owner@bench.example")
    stored = store(org, args.interactions)
    owner = Membership.objects.for_org(org).get().user
    console = Client()
    console.force_login(owner)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    figures = {
        "overview": timed(console, "/console/", args.requests),
        "chart_data": timed(console, "/console/charts/quality.json", args.requests),
        "api_interactions_page": timed(api, "/api/v1/interactions?limit=100", args.requests),
    }
    print(json.dumps({"database": connection.vendor, "stored_interactions": stored, "requests": args.requests, **figures},
                     indent=None if args.json else 2))


def store(org, count: int) -> int:
    """Bulk writes, bypassing ingestion: each interaction's feedback_seen is set as ingestion would."""
    rng, now, versions = random.Random(0), timezone.now(), [None, f"{org.slug}@v1", f"{org.slug}@v2", f"{org.slug}@v3"]
    for start in range(0, count, 5000):
        kinds = [rng.choice(FEEDBACK) for _ in range(start, min(count, start + 5000))]
        rows = [Interaction(org=org, source=Interaction.Source.GATEWAY, adapter=versions[min(3, n * 4 // count)],
                            latency_ms=rng.uniform(50, 400), feedback_seen=feedback_bit(kind)) for n, kind in enumerate(kinds, start)]
        Interaction.objects.for_org(org).bulk_create(rows)
        moments = [now - timedelta(days=14) * (1 - n / count) for n in range(start, start + len(rows))]
        for row, moment in zip(rows, moments):
            row.created_at = moment
        Interaction.objects.for_org(org).bulk_update(rows, ["created_at"])
        FeedbackEvent.objects.for_org(org).bulk_create([
            FeedbackEvent(org=org, interaction=row, type=kind, idempotency_key=str(row.pk),
                          occurred_at=row.created_at, received_at=row.created_at) for row, kind in zip(rows, kinds)])
    return Interaction.objects.for_org(org).count()


if __name__ == "__main__":
    main()
