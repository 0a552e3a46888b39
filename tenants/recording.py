"""Recording interactions and background tasks, under each organization's privacy policy."""

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from tenants import data_keys, recording_pg
from tenants.redaction import aside, redact
from tenants.audit import audit_record
from tenants.crypto import DecryptionError
from tenants.errors import Conflict, NotFound
from tenants.feedback import idempotency_key_normal
from tenants.locking import OrgRows
from tenants.models import BackgroundTask, FeedbackEvent, Interaction, Organization, PrivacyPolicy
from tenants.selectors import tasks_list
from tenants.signals import content_erased
from tenants.storage import (
    FEEDBACK_ROW_BYTES,
    INTERACTION_ROW_BYTES,
    TASK_ROW_BYTES,
    content_bytes,
    interaction_bytes,
    storage_lock,
    storage_quota_check,
    storage_used_change,
)
from tenants.transactions import retried_on_integrity_error


@dataclass(frozen=True)
class SampledTokens:
    """The tokens the model read and wrote, as served: what training needs to recompute the
    policy's probabilities and weigh them against the ones it was sampled with."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]  # one per completion id

    def as_dict(self) -> dict:  # not dataclasses.asdict: it deep-copies every list, element by element
        return {"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids, "logprobs": self.logprobs}

    def __post_init__(self) -> None:
        if len(self.completion_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.completion_ids)} completion tokens but {len(self.logprobs)} logprobs")


@dataclass(frozen=True)
class InteractionContent:
    messages: list[dict]
    completion: str
    tokens: SampledTokens | None = None


def interaction_record(*, org: Organization, content: InteractionContent, source: str, **fields) -> Interaction:
    """Store one completion: metrics always, content only if the policy keeps it (see
    `interactions_record`). Past the organization's storage quota a recording is refused
    (QuotaExceeded), except the gateway's: it checks before the model runs, and a completion
    already served is recorded."""
    if source != Interaction.Source.GATEWAY:
        storage_quota_check(org=org)
    return interactions_record([Recording(org=org, content=content, source=source, **fields)])[0]


@dataclass(frozen=True)
class Recording:
    """One completion to store, with what is known about it."""

    org: Organization
    content: InteractionContent
    source: str
    interaction_id: uuid.UUID | None = None
    adapter: str | None = None
    task: BackgroundTask | None = None
    end_user: str | None = None
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    interrupted: bool = False


def interactions_record(recordings: Sequence[Recording]) -> list[Interaction]:
    """Store completions in one transaction, in order: metrics always, content only where the
    organization's policy keeps it. The gateway groups the completions that finish together
    (serving/gateway/recorder.py): the transaction's fixed costs are paid once for all.

    Redaction happens before encryption, so a secret never reaches the database even as
    ciphertext; in zero-retention mode the text is dropped here and never written anywhere.
    It also happens before the write transaction, under the policy as read then: on SQLite that
    transaction holds every organization's writes, so it must cost milliseconds whatever the
    content. Inside, each organization's policy is read again under a share lock
    (tenants/locking.py): a switch to zero retention waits for recordings in flight, then purges
    them too, and one that turned redaction on in between is honoured. Token ids spell the text
    they encode, so they are kept only when redaction found nothing to replace. The end user's
    identifier (the OpenAI `user` field) is personal data: it is sealed with the content, purged
    with it, and never stored in zero-retention mode; canary assignment hashes it from the
    request, not from storage. On PostgreSQL, recordings of one organization (the gateway's
    usual group below saturation) are written in one statement that checks the policy and key
    are still as last read (tenants/recording_pg.py).
    """
    orgs = {recording.org.pk: recording.org for recording in recordings}
    if len(orgs) == 1 and connection.vendor == "postgresql" and not connection.in_atomic_block:
        stored = _recorded_in_one_statement(recordings)
        if stored is not None:
            return stored
    policies = {org_id: text_policy(org_id, locked=False) for org_id in orgs}
    prepared = [_Sealable.prepare(r.content, r.end_user, policies[r.org.pk], _aside_over(r)) for r in recordings]
    with transaction.atomic():
        for org_id in orgs:
            policies[org_id] = text_policy(org_id, locked=True)
        interactions, sealing = [], []
        for recording, sealable in zip(recordings, prepared):
            policy = policies[recording.org.pk]
            interaction = _interaction_of(recording)
            if policy.store_content:
                if sealable.payload is None or (policy.redact and not sealable.redacted):  # changed since: rare
                    sealable = _Sealable.prepare(recording.content, recording.end_user, policy, _aside_over(recording))
                interaction.redactions = sealable.redactions
                sealing.append((interaction, sealable.payload))
            interactions.append(interaction)
        data_keys.interactions_content_seal(sealing)
        Interaction.objects.across_orgs().bulk_create(interactions)  # each row names its own organization
        added: Counter = Counter()
        for interaction in interactions:
            added[interaction.org_id] += interaction_bytes(interaction.content)
        for org_id, delta in added.items():
            storage_used_change(org=orgs[org_id], delta=delta)
    return interactions


def _recorded_in_one_statement(recordings: Sequence[Recording]) -> list[Interaction] | None:
    """On PostgreSQL, one organization's recordings in one statement (tenants/recording_pg.py),
    under the policy and data key this process saw last, if they still hold: None, with nothing
    stored, when it has not seen them yet or either changed since."""
    org = recordings[0].org
    policy, version = _policies_seen.get(org.pk), data_keys.active_version_seen(org.pk)
    if policy is None or (policy.store_content and version is None):
        return None
    interactions, sealing = [], []
    for recording in recordings:
        sealable = _Sealable.prepare(recording.content, recording.end_user, policy, _aside_over(recording))
        interaction = _interaction_of(recording)
        if sealable.payload is not None:
            interaction.redactions = sealable.redactions
            sealing.append((interaction, sealable.payload))
        interactions.append(interaction)
    try:
        data_keys.interactions_content_seal(sealing, versions={org.pk: version})
    except DecryptionError:  # the version seen was destroyed since: the transaction reads the active one
        return None
    added = sum(interaction_bytes(interaction.content) for interaction in interactions)
    stored = recording_pg.interactions_insert_if_unchanged(
        interactions, store_content=policy.store_content, redact=policy.redact, key_version=version if sealing else None,
        added_bytes=added,
    )
    return interactions if stored else None


def _interaction_of(recording: Recording) -> Interaction:
    return Interaction(
        id=recording.interaction_id or uuid.uuid4(), org=recording.org, source=recording.source, adapter=recording.adapter,
        task=recording.task, latency_ms=recording.latency_ms, prompt_tokens=recording.prompt_tokens,
        completion_tokens=recording.completion_tokens, interrupted=recording.interrupted,
    )


@dataclass(frozen=True)
class TextPolicy:
    """What an organization's privacy policy says of a completion's text."""

    store_content: bool
    redact: bool


def _policy_rows(org_id) -> QuerySet:
    return PrivacyPolicy.objects.for_org(org_id).values_list("store_content", "redact")


_policies, _policies_locked = OrgRows(_policy_rows), OrgRows(_policy_rows, for_share=True)
_policies_seen: dict = {}  # by organization id, the last read: recording_pg.py writes under it if it still holds


def text_policy(org_id, *, locked: bool) -> TextPolicy:
    """Read as the recording starts (to redact before its transaction), then again inside it,
    share-locked (tenants/locking.py)."""
    rows = (_policies_locked if locked else _policies).read(org_id)
    if not rows:
        _policies_seen.pop(org_id, None)
        raise PrivacyPolicy.DoesNotExist(f"Organization {org_id} has no privacy policy.")
    store_content, redact = rows[0]
    _policies_seen[org_id] = policy = TextPolicy(store_content=bool(store_content), redact=bool(redact))
    return policy


def _aside_over(recording: Recording) -> int:
    """The gateway's recordings are bounded by the organization's token rate; the API's, by its
    bytes a minute, and large ones are redacted aside, at low priority (tenants/redaction/aside.py)."""
    return 0 if recording.source == Interaction.Source.GATEWAY else settings.REDACTION_ASIDE_OVER


@dataclass(frozen=True)
class _Sealable:
    """What of a completion's content is stored, under one reading of the policy."""

    payload: dict | None
    redacted: bool
    redactions: int = 0

    @classmethod
    def prepare(cls, content: InteractionContent, end_user: str | None, policy: TextPolicy, aside_over: int) -> "_Sealable":
        if not policy.store_content:
            return cls(payload=None, redacted=False)
        messages, completion, redactions = content.messages, content.completion, 0
        if policy.redact:
            messages, completion, redactions = aside.redact_interaction(messages, completion, aside_over=aside_over)
        payload = {"messages": messages, "completion": completion}
        if content.tokens is not None and not redactions:
            payload["tokens"] = content.tokens.as_dict()
        if end_user is not None:  # 200 characters at most: redacted here, never aside
            payload["end_user"] = redact(end_user).text if policy.redact else end_user
        return cls(payload=payload, redacted=policy.redact, redactions=redactions)


def interaction_get(*, org: Organization, interaction_id) -> Interaction:
    interaction = Interaction.objects.for_org(org).select_related("org").filter(pk=interaction_id).first()
    if interaction is None:
        raise NotFound(f"No interaction {interaction_id} in this organization.")
    return interaction


def interaction_content(*, interaction: Interaction) -> dict | None:
    return data_keys.interaction_content_open(interaction=interaction)


def interaction_erase(*, interaction: Interaction, actor: str) -> None:
    """Erase one interaction with its content and the feedback about it; the adapter versions
    trained on it are tainted in the same transaction (signals.content_erased)."""
    erased_id = str(interaction.pk)  # delete() clears pk
    with transaction.atomic():
        storage_lock(org=interaction.org)
        erasing = Interaction.objects.for_org(interaction.org).filter(pk=interaction.pk)
        if erasing.exists():
            had_content = erasing.filter(content__isnull=False).exists()  # without it, it never trained anything
            feedback = FeedbackEvent.objects.for_org(interaction.org).filter(interaction=interaction).count()
            freed = INTERACTION_ROW_BYTES + content_bytes(erasing) + feedback * FEEDBACK_ROW_BYTES
            interaction.delete()
            storage_used_change(org=interaction.org, delta=-freed)
            if had_content:
                content_erased.send(sender=Interaction, org=interaction.org, interaction_ids=[erased_id], reason="erased")
        audit_record(org=interaction.org, actor=actor, action="interaction.erase", target=erased_id)


def task_create(*, org: Organization) -> BackgroundTask:
    storage_quota_check(org=org)
    with transaction.atomic():
        task = BackgroundTask.objects.create(org=org)
        storage_used_change(org=org, delta=TASK_ROW_BYTES)
    return task


def task_get(*, org: Organization, task_id) -> BackgroundTask:
    task = tasks_list(org=org).filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"No task {task_id} in this organization.")
    return task


def task_outcome_record(*, task: BackgroundTask, value: float, idempotency_key: str) -> tuple[FeedbackEvent, bool]:
    """Record a task's one outcome. Returns the event and whether it was new.

    A replay with the same key is answered with the stored event; a different outcome for a
    task that already has one is a conflict, not an overwrite. Two deliveries racing on the
    idempotency constraint: the loser retries and finds the winner's event.
    """
    key = idempotency_key_normal(idempotency_key)
    return retried_on_integrity_error(lambda: _task_outcome_record(task, value, key))


def _task_outcome_record(task: BackgroundTask, value: float, idempotency_key: str) -> tuple[FeedbackEvent, bool]:
    org = task.org
    with transaction.atomic():
        existing = FeedbackEvent.objects.for_org(org).filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            if existing.task_id != task.pk or existing.type != FeedbackEvent.Type.TASK_OUTCOME or existing.value != value:
                raise Conflict(f"Idempotency key {idempotency_key!r} was already used for a different event.")
            return existing, False
        if FeedbackEvent.objects.for_org(org).filter(task=task, type=FeedbackEvent.Type.TASK_OUTCOME).exists():
            raise Conflict(f"Task {task.pk} already has an outcome.")
        storage_quota_check(org=org)
        now = timezone.now()
        event = FeedbackEvent.objects.create(
            org=org, task=task, type=FeedbackEvent.Type.TASK_OUTCOME, value=value,
            idempotency_key=idempotency_key, occurred_at=now, received_at=now,
        )
        storage_used_change(org=org, delta=FEEDBACK_ROW_BYTES)
    return event, True
