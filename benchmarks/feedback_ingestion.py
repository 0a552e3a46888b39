"""Feedback ingestion throughput: the batch endpoint vs. the same rows bulk-inserted raw.

    .venv/bin/python benchmarks/feedback_ingestion.py [--events 20000] [--batch 1000] [--json]

The endpoint path is the whole request, in process (Django's test client, no sockets): Django's handler and middleware, bearer-key
authentication, strict JSON parsing, validation, the tenant-scoped existence and idempotency
queries, and the insert, for an organization with the default policy (redaction on; feedback
events carry no text, so neither redaction nor encryption has work on this path). The baseline
writes the same rows, already in database form, with one executemany and commit per batch
and nothing else: the floor any ingestion path stands on. Both run in
the same process on the same database, so the ratio holds on a noisy machine. Uses a fresh
SQLite file, or PostgreSQL when DATABASE_URL is set (the database is emptied afterwards only
for SQLite: point it at a throwaway database).
"""

import argparse
import json
import statistics
import time
import uuid

import _django

_django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from tenants.models import FeedbackEvent, Interaction  # noqa: E402
from tenants.organizations import org_create  # noqa: E402
from tenants.recording import InteractionContent, interaction_record  # noqa: E402

EVENT_TYPES = ["edit_accepted", "edit_persisted", "edit_reverted", "dissatisfied_followup"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--interactions", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    org, key = org_create(name=f"bench-{uuid.uuid4().hex[:6]}", owner_email="bench@example.com", policy={"redact": True, "store_content": True})
    content = InteractionContent(messages=[{"role": "user", "content": "Task: Return the sum of a list."}], completion="<ask>Which file?</ask>")
    interaction_ids = [str(interaction_record(org=org, content=content, source=Interaction.Source.API).pk) for _ in range(args.interactions)]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")

    time_endpoint(client, make_batches(interaction_ids, args.batch, args.batch, "warm-up"))
    endpoint, raw = [], []
    for repeat in range(args.repeats):
        batches = make_batches(interaction_ids, args.events, args.batch, f"api{repeat}")
        endpoint.append(time_endpoint(client, batches))
        raw.append(time_raw_insert(org, make_batches(interaction_ids, args.events, args.batch, f"raw{repeat}")))

    endpoint_rate, raw_rate = statistics.median(endpoint), statistics.median(raw)
    figures = {
        "database": connection.vendor,
        "events": args.events,
        "batch": args.batch,
        "endpoint_events_per_s": round(endpoint_rate),
        "raw_bulk_insert_events_per_s": round(raw_rate),
        "ratio": round(endpoint_rate / raw_rate, 3),
        "stored": FeedbackEvent.objects.for_org(org).count(),
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"database {figures['database']}, {args.events} events in batches of {args.batch}, median of {args.repeats} runs")
        print(f"  batch endpoint, whole request:  {figures['endpoint_events_per_s']:>8} events/s")
        print(f"  raw bulk insert, same rows:     {figures['raw_bulk_insert_events_per_s']:>8} events/s")
        print(f"  ratio endpoint / raw:           {figures['ratio']:>8}")


def make_batches(interaction_ids: list[str], events: int, batch: int, tag: str) -> list[list[dict]]:
    now = timezone.now().isoformat()
    rows = [
        {"interaction_id": interaction_ids[i % len(interaction_ids)], "type": EVENT_TYPES[i % len(EVENT_TYPES)],
         "idempotency_key": f"{tag}-{i}", "occurred_at": now}
        for i in range(events)
    ]
    return [rows[i : i + batch] for i in range(0, events, batch)]


def time_endpoint(client: Client, batches: list[list[dict]]) -> float:
    bodies = [json.dumps({"events": batch}) for batch in batches]  # encoding is the client's cost
    start = time.perf_counter()
    for body in bodies:
        response = client.post("/api/v1/feedback", body, content_type="application/json")
        assert response.status_code == 200, response.content[:500]
    return sum(map(len, batches)) / (time.perf_counter() - start)


def time_raw_insert(org, batches: list[list[dict]]) -> float:
    """The floor: rows already in database form, one executemany and commit per batch."""
    as_uuid = (lambda u: u) if connection.features.has_native_uuid_field else (lambda u: u.hex)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    prepared = [
        [(as_uuid(uuid.uuid4()), as_uuid(org.pk), as_uuid(uuid.UUID(e["interaction_id"])), e["type"], None,
          e["idempotency_key"], now, now) for e in batch]
        for batch in batches
    ]
    sql = (f"INSERT INTO {FeedbackEvent._meta.db_table} (id, org_id, interaction_id, type, value, idempotency_key,"
           " occurred_at, received_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")
    start = time.perf_counter()
    for rows in prepared:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, rows)
    return sum(map(len, batches)) / (time.perf_counter() - start)


if __name__ == "__main__":
    main()
