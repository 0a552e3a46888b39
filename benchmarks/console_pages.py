"""The console's heaviest pages: render time of the interactions list (100 rows, their text
decrypted) and of the audit log, with 10,000 interactions stored, against the tenant API's
same page of the same rows in the same run.

    .venv/bin/python benchmarks/console_pages.py [--interactions 10000] [--audit-events 10000] [--requests 50] [--json]

Requests go through the whole Django stack in process (the test client, no sockets): session
or bearer authentication, the role check, the selectors, decryption, the template or the JSON
renderer. Recordings are made through `interaction_record` (redacted, encrypted), each with a
feedback event. Uses a fresh SQLite file, or PostgreSQL when DATABASE_URL is set (point it at a
throwaway database). Target (issue 20): p95 under 150 ms on 2 cores.
"""

import argparse
import json
import statistics
import time
import uuid

import _django

_django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from tenants.audit import audit_record  # noqa: E402
from tenants.feedback import FeedbackIn, feedback_ingest  # noqa: E402
from tenants.models import Interaction, Membership  # noqa: E402
from tenants.organizations import org_create  # noqa: E402
from tenants.recording import InteractionContent, interaction_record  # noqa: E402

PROMPT = "Task: Return the sum of the numbers in a list.\n\ndef total(xs):\n    return 0\n"
COMPLETION = '<edit path="app/math.py">def total(xs):\n    return sum(xs)\n</edit>'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interactions", type=int, default=10_000)
    parser.add_argument("--audit-events", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    org, key = org_create(name=f"bench-{uuid.uuid4().hex[:6]}", owner_email="owner@bench.example")
    started = time.perf_counter()
    content = InteractionContent(messages=[{"role": "user", "content": PROMPT}], completion=COMPLETION)
    ids = [interaction_record(org=org, content=content, source=Interaction.Source.API, adapter=f"{org.slug}@v{n % 3 + 1}",
                              latency_ms=100.0 + n % 50).pk for n in range(args.interactions)]
    for start in range(0, len(ids), 1000):
        feedback_ingest(org=org, events=[FeedbackIn(interaction_id=pk, type="edit_persisted", idempotency_key=str(pk))
                                         for pk in ids[start:start + 1000]])
    for n in range(args.audit_events):
        audit_record(org=org, actor="user:owner@bench.example", action="privacy_policy.update",
                     before={"retention_days": n}, after={"retention_days": n + 1})
    stored_s = time.perf_counter() - started

    owner = Membership.objects.for_org(org).get().user
    console = Client()
    console.force_login(owner)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    pages = {
        "interactions": (console, "/console/interactions/", api, "/api/v1/interactions?limit=100"),
        "audit_log": (console, "/console/audit-log/", api, "/api/v1/audit-log?limit=100"),
    }
    figures = {}
    for name, (page_client, page, api_client, api_page) in pages.items():
        console_ms, api_ms = timed(page_client, page, args.requests), timed(api_client, api_page, args.requests)
        figures[name] = {"console": console_ms, "api": api_ms, "p95_ratio": round(console_ms["p95_ms"] / api_ms["p95_ms"], 2)}
    print(json.dumps({
        "database": connection.vendor, "stored_interactions": args.interactions, "stored_audit_events": args.audit_events,
        "requests": args.requests, "seconds_to_store": round(stored_s, 1), **figures,
    }, indent=None if args.json else 2))


def timed(client: Client, path: str, requests: int) -> dict:
    for _ in range(5):  # warm-up: templates compiled, connections open
        assert client.get(path).status_code == 200, path
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, path
    times.sort()
    return {"p50_ms": round(statistics.median(times), 1), "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1)}


if __name__ == "__main__":
    main()
