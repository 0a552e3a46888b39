"""Feedback ingestion: batches of events, idempotent, all-or-nothing.

A batch is validated whole before anything is written. If any event is invalid, refers to
something this organization does not have, or reuses an idempotency key for a different event,
nothing of the batch is stored and the error lists each offending event by index. Otherwise
every event is stored exactly once: a replayed key (the same event delivered again, minutes or
days later) is reported as a duplicate and not stored again.

Parsing is hand-written rather than a DRF serializer: it is the hot path of the platform
(thousands of events a second) and a serializer costs more than the database write.
"""

import math
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.db.models import F
from django.db.models.lookups import Exact
from django.utils import timezone

from tenants.errors import Conflict, InvalidInput, NotFound
from tenants.models import FeedbackEvent, Interaction, Organization, feedback_bit
from tenants.storage import FEEDBACK_ROW_BYTES, storage_quota_check, storage_used_change
from tenants.transactions import retried_on_integrity_error

EVENT_TYPES = frozenset(FeedbackEvent.Type.values)
EVENT_FIELDS = frozenset({"interaction_id", "type", "idempotency_key", "value", "occurred_at"})
MAX_KEY_LENGTH = 200
# Clients' clocks drift; an event stamped further in the future than this is a bug upstream.
MAX_CLOCK_SKEW = timedelta(minutes=5)
# Anything earlier is a client bug (an epoch of 0, year 1), and near year 1 a time zone
# offset would overflow the database's datetime.
EARLIEST_EVENT = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class FeedbackIn:
    type: str
    idempotency_key: str
    interaction_id: uuid.UUID
    value: float | None = None
    occurred_at: datetime | None = None

    def same_event_as(self, stored) -> bool:
        return (
            self.type == stored.type
            and self.interaction_id == stored.interaction_id
            and self.value == stored.value
        )


@dataclass(frozen=True)
class ItemResult:
    index: int
    status: str  # "created" or "duplicate"
    id: uuid.UUID


def feedback_parse(items, *, max_batch: int) -> list[FeedbackIn]:
    """Validate a batch's raw JSON events, raising InvalidInput that lists every bad event."""
    if not isinstance(items, list):
        raise InvalidInput("'events' must be a list of feedback events.")
    if not items:
        raise InvalidInput("'events' is empty: send at least one event.")
    if len(items) > max_batch:
        raise InvalidInput(f"A batch holds at most {max_batch} events; this one has {len(items)}. Split it.")
    now = timezone.now()
    parsed, errors = [], []
    for index, item in enumerate(items):
        try:
            parsed.append(_parse_event(item, now))
        except ValueError as error:
            errors.append({"index": index, "message": str(error)})
    if errors:
        raise InvalidInput(f"{len(errors)} of {len(items)} events are invalid; nothing was stored.", details=errors)
    return parsed


def _parse_event(item, now: datetime) -> FeedbackIn:
    if not isinstance(item, dict):
        raise ValueError("An event must be a JSON object.")
    unknown = item.keys() - EVENT_FIELDS
    if unknown:
        raise ValueError(f"Unknown field(s): {', '.join(sorted(map(str, unknown)))}.")
    event_type = item.get("type")
    if not isinstance(event_type, str) or event_type not in EVENT_TYPES:
        raise ValueError(f"'type' must be one of {', '.join(sorted(EVENT_TYPES))}; got {event_type!r}.")
    interaction_id = _optional_uuid(item, "interaction_id")
    if interaction_id is None:
        raise ValueError("'interaction_id' is required (a background task's outcome goes to POST /api/v1/tasks/<id>/outcome).")
    value = _optional_number(item, "value")
    if event_type == FeedbackEvent.Type.TASK_OUTCOME and (value is None or not 0.0 <= value <= 1.0):
        raise ValueError("A task_outcome needs a 'value' between 0 and 1.")
    return FeedbackIn(
        type=event_type,
        idempotency_key=_idempotency_key(item.get("idempotency_key")),
        interaction_id=interaction_id,
        value=value,
        occurred_at=_occurred_at(item.get("occurred_at"), now),
    )


def _optional_uuid(item: dict, field: str) -> uuid.UUID | None:
    raw = item.get(field)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ValueError(f"'{field}' must be a string id.")
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise ValueError(f"'{field}' is not a valid id: {raw[:80]!r}.") from None


def _optional_number(item: dict, field: str) -> float | None:
    raw = item.get(field)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"'{field}' must be a finite number.")
    try:
        value = float(raw)  # a JSON integer of 400 digits overflows here
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise ValueError(f"'{field}' must be a finite number.")
    return value


def _idempotency_key(raw) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("'idempotency_key' is required: a non-empty string unique to this event.")
    if len(raw) > MAX_KEY_LENGTH:
        raise ValueError(f"'idempotency_key' is longer than {MAX_KEY_LENGTH} characters.")
    if not raw.isprintable():
        raise ValueError("'idempotency_key' must be printable text.")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("'idempotency_key' is not valid Unicode (lone surrogate).") from None
    return idempotency_key_normal(raw)


def idempotency_key_normal(key: str) -> str:
    """Keys that read the same are one key: "café" sent precomposed, then with a combining
    accent, is a replay, not a second event."""
    return unicodedata.normalize("NFC", key)


def _occurred_at(raw, now: datetime) -> datetime:
    if raw is None:
        return now
    if not isinstance(raw, str):
        raise ValueError("'occurred_at' must be an ISO 8601 time string.")
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"'occurred_at' is not an ISO 8601 time: {raw[:40]!r}.") from None
    if when.tzinfo is None:
        raise ValueError("'occurred_at' needs a time zone (e.g. '2026-01-31T12:00:00Z').")
    if not EARLIEST_EVENT <= when <= now + MAX_CLOCK_SKEW:
        raise ValueError(f"'occurred_at' must lie between {EARLIEST_EVENT.date()} and now.")
    return when.astimezone(UTC)


def feedback_ingest(*, org: Organization, events: list[FeedbackIn]) -> list[ItemResult]:
    """Store a parsed batch once. Safe to call concurrently with the same batch: the loser of
    the race on the idempotency constraint retries and finds the winner's rows."""
    return retried_on_integrity_error(lambda: _ingest(org, events))


def _ingest(org: Organization, events: list[FeedbackIn]) -> list[ItemResult]:
    with transaction.atomic():
        _require_targets_exist(org, events)
        stored = {
            key: (event_id, FeedbackIn(type=type_, idempotency_key=key, interaction_id=interaction_id, value=value))
            for event_id, key, type_, interaction_id, value in FeedbackEvent.objects.for_org(org)
            .filter(idempotency_key__in={e.idempotency_key for e in events})
            .values_list("id", "idempotency_key", "type", "interaction_id", "value")
        }
        now = timezone.now()
        results, new_events, conflicts = [], [], []
        for index, event in enumerate(events):
            previous = stored.get(event.idempotency_key)
            if previous is None:
                previous = stored[event.idempotency_key] = (uuid.uuid4(), event)  # repeated later in the batch: a duplicate
                new_events.append(previous)
                results.append(ItemResult(index, "created", previous[0]))
            elif event.same_event_as(previous[1]):
                results.append(ItemResult(index, "duplicate", previous[0]))
            else:
                conflicts.append({"index": index, "message": f"idempotency_key {event.idempotency_key!r} was used for a different event."})
        if conflicts:
            raise Conflict(f"{len(conflicts)} events reuse an idempotency key for a different event; nothing was stored.", details=conflicts)
        if new_events:  # a replay of stored events is answered even past the quota
            storage_quota_check(org=org)
            _insert(org, new_events, now)
            _mark_seen(org, [event for _, event in new_events])
            storage_used_change(org=org, delta=len(new_events) * FEEDBACK_ROW_BYTES)
    return results


_INSERT_COLUMNS = ("id", "org_id", "interaction_id", "type", "value", "idempotency_key", "occurred_at", "received_at")


def _insert(org: Organization, new_events: list[tuple[uuid.UUID, FeedbackIn]], now: datetime) -> None:
    """One multi-row INSERT through the DB-API.

    The ORM's bulk_create builds a model instance and prepares every field of every row
    through several layers: on this hot path that cost more than the rest of the request.
    """
    if not new_events:
        return
    as_uuid = (lambda u: u) if connection.features.has_native_uuid_field else (lambda u: u.hex)
    as_time = connection.ops.adapt_datetimefield_value
    org_id, received_at = as_uuid(org.pk), as_time(now)
    rows = [
        (as_uuid(event_id), org_id, as_uuid(e.interaction_id), e.type, e.value, e.idempotency_key,
         as_time(e.occurred_at or now), received_at)
        for event_id, e in new_events
    ]
    columns = ", ".join(map(connection.ops.quote_name, _INSERT_COLUMNS))
    table = connection.ops.quote_name(FeedbackEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(_INSERT_COLUMNS))})", rows)


def _mark_seen(org: Organization, events: list[FeedbackIn]) -> None:
    """Set each interaction's bit of each kind it now has feedback of: one UPDATE per kind, which
    leaves rows that have the bit already (a second edit_persisted, say) unwritten."""
    by_kind: dict[str, set[uuid.UUID]] = {}
    for event in events:
        by_kind.setdefault(event.type, set()).add(event.interaction_id)
    for kind, interaction_ids in by_kind.items():
        bit = feedback_bit(kind)
        unmarked = Exact(F("feedback_seen").bitand(bit), 0)
        Interaction.objects.for_org(org).filter(unmarked, pk__in=interaction_ids).update(feedback_seen=F("feedback_seen").bitor(bit))


def _require_targets_exist(org: Organization, events: list[FeedbackIn]) -> None:
    wanted = {event.interaction_id for event in events}
    found = set(Interaction.objects.for_org(org).filter(pk__in=wanted).values_list("pk", flat=True))
    missing = [
        {"index": index, "message": f"No interaction {event.interaction_id} in this organization."}
        for index, event in enumerate(events)
        if event.interaction_id not in found
    ]
    if missing:
        raise NotFound(f"{len(missing)} of {len(events)} events name an interaction this organization does not have; nothing was stored.", details=missing)
