"""The dataset of one training run: an organization's served completions with the rewards
their feedback earned, as the engine's examples, and the lineage that names them.

On-policy first: completions served by the incumbent version. Those of the versions it
replaced, up to `staleness` deployments back, also count, marked off-policy: the engine
weighs them with truncated importance ratios against the incumbent. Older ones never do.

One interaction in ten (tenants.holdout) never trains: the gates judge candidates on it.
Any other interaction counts when it has feedback (its own events or its task's outcome), its text
and tokens were stored (not zero-retention, not purged by retention, not redacted: token ids
spell the text), and, with `since`, it is newer than the last run or got feedback after it:
feedback that arrives after a run used its interaction counts in a later run, never lost.
With `until`, nothing created or received later is seen, so that the same (since, until]
builds the same dataset again (a run's later attempts rely on it).
"""

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import Q, QuerySet

from serving.models import AdapterVersion
from tenants.holdout import held_out
from tenants.models import FeedbackEvent, Interaction, Organization
from tenants.privacy import trainable_check
from tenants.recording import interaction_content
from training import engine
from training.rewards import RewardSpecValues, interaction_reward, outcome_shares

STALENESS_VERSIONS = 1  # deployments back whose completions still train, importance-weighted
SHARED_GROUP = "shared"  # examples with no other of their prompt share one baseline per served version


@dataclass(frozen=True)
class Dataset:
    examples: list["engine.Example"]
    interaction_ids: list[str]  # in the order of `examples`
    sha256: str  # of the ids, rewards and tokens: what the adapter was trained on, exactly
    off_policy: int  # examples served by an older version than the incumbent
    replayed: int  # examples an earlier run trained on already
    skipped: dict[str, int]  # interactions left out, by reason


def dataset_build(*, org: Organization, incumbent: AdapterVersion | None, spec: RewardSpecValues,
                  since: datetime | None = None, until: datetime | None = None, staleness: int = STALENESS_VERSIONS,
                  fresh_since: datetime | None = None, limit: int | None = None,
                  behaviours: dict[str | None, bool] | None = None) -> Dataset:
    """The examples of one run; with `limit`, the most recent ones only, so that one organization's
    backlog cannot hold a worker for hours. With `fresh_since` (the last run's end, when the run's
    window reaches further back), what was created before it and got no feedback after it was
    trained on already: such examples are marked replayed. `behaviours` (served name, None: the
    base, -> whether it is the version trained from) replaces the incumbent and its staleness
    (`served_since`, for a run that trains from an older version than the incumbent)."""
    trainable_check(org=org)
    if behaviours is None:
        behaviours = _behaviour_versions(incumbent, staleness)
    candidates = _candidates(org, behaviours, since, until)  # a query: what follows selects in SQL, not over a list of ids
    rows = list(candidates.defer("content"))  # the content only of what trains, read below
    events = _events_by_interaction(org, candidates, until)
    outcomes, steps = _task_credit(org, candidates, until)
    renewed = _feedback_after(org, candidates, rows, fresh_since, until) if fresh_since is not None else set()
    skipped, rated = Counter(), []
    for interaction in rows:
        if held_out(interaction.pk):
            skipped["held out for the tenant suite"] += 1
        elif not events[interaction.pk] and interaction.task_id not in outcomes:
            skipped["no feedback yet"] += 1
        else:
            rated.append(interaction)
    picked = _newest_with_tokens(org, rated, limit, skipped)
    examples, ids, served_by = [], [], []
    for interaction, tokens in picked:
        share, value = 0.0, None
        if interaction.task_id in outcomes:
            position, count = steps[interaction.pk]
            share, value = outcome_shares(steps=count, spec=spec)[position], outcomes[interaction.task_id]
        reward = interaction_reward(spec=spec, events=events[interaction.pk], latency_ms=interaction.latency_ms,
                                    outcome_share=share, outcome_value=value)
        examples.append(engine.Example(
            prompt_ids=tokens["prompt_ids"], completion_ids=tokens["completion_ids"], sampled_logprobs=tokens["logprobs"],
            reward=reward, group=_prompt_key(tokens["prompt_ids"]), behaviour_is_incumbent=behaviours[interaction.adapter],
            replayed=fresh_since is not None and interaction.created_at <= fresh_since and interaction.pk not in renewed,
        ))
        ids.append(str(interaction.pk))
        served_by.append(interaction.adapter)
    examples = share_lonely_groups(examples, served_by)
    return Dataset(examples=examples, interaction_ids=ids, sha256=_lineage_hash(ids, examples),
                   off_policy=sum(not e.behaviour_is_incumbent for e in examples), replayed=sum(e.replayed for e in examples),
                   skipped=dict(skipped))


READ_CHUNK = 500  # rows whose content is read (and decrypted) at once: well under any database's parameter limit


def _newest_with_tokens(org: Organization, rated: list[Interaction], limit: int | None,
                        skipped: Counter) -> list[tuple[Interaction, dict]]:
    """The newest `limit` rated interactions that kept their tokens, oldest first, with them.
    Content is read and decrypted newest first and only until the limit is reached: a backlog
    costs what trains, not what is stored."""
    picked, newest_first = [], rated[::-1]
    for start in range(0, len(newest_first), READ_CHUNK):
        if limit is not None and len(picked) >= limit:
            skipped["beyond the run's limit (older)"] += len(newest_first) - start
            break
        chunk = newest_first[start:start + READ_CHUNK]
        stored = Interaction.objects.for_org(org).select_related("org").in_bulk([i.pk for i in chunk])
        for position, interaction in enumerate(chunk):
            if limit is not None and len(picked) >= limit:
                skipped["beyond the run's limit (older)"] += len(chunk) - position
                break
            tokens = (interaction_content(interaction=stored[interaction.pk]) or {}).get("tokens")
            if tokens is None:
                skipped["no tokens (recorded through the API, or redacted)"] += 1
            else:
                picked.append((interaction, tokens))
    return picked[::-1]


def _behaviour_versions(incumbent: AdapterVersion | None, staleness: int) -> dict[str | None, bool]:
    """The served names whose completions count, each with whether it is the incumbent."""
    if incumbent is None:
        return {None: True}
    versions, version = {incumbent.name: True}, incumbent
    for _ in range(staleness):
        replaced = version.replaced
        versions[replaced.name if replaced else None] = False
        if replaced is None:
            break
        version = replaced
    return versions


def served_since(incumbent: AdapterVersion | None, parent: AdapterVersion | None) -> dict[str | None, bool]:
    """The behaviours of a run that trains from `parent`, an ancestor of the incumbent that
    erasure did not reach: what every version deployed since the parent served (each replaced
    the one before), off-policy; the parent's own completions, on-policy."""
    versions, version = {}, incumbent
    while version is not None and version != parent and version.name not in versions:  # redeploying an old version loops
        versions[version.name] = False
        version = version.replaced
    versions[parent.name if parent else None] = True
    return versions


def _candidates(org: Organization, behaviours: dict[str | None, bool], since: datetime | None,
                until: datetime | None) -> QuerySet[Interaction]:
    served_by = Q(adapter__in=[name for name in behaviours if name is not None])
    if None in behaviours:
        served_by |= Q(adapter__isnull=True)
    interactions = Interaction.objects.for_org(org).filter(served_by, content__isnull=False)
    if until is not None:
        interactions = interactions.filter(created_at__lte=until)
    if since is not None:
        received = {"received_at__gt": since} | ({"received_at__lte": until} if until is not None else {})
        new_feedback = (Q(**{f"feedback_events__{k}": v for k, v in received.items()})
                        | Q(**{f"task__feedback_events__{k}": v for k, v in received.items()}))
        interactions = interactions.filter(Q(created_at__gt=since) | new_feedback).distinct()
    return interactions.order_by("created_at", "pk")


def _received_until(org: Organization, until: datetime | None):
    events = FeedbackEvent.objects.for_org(org)
    return events if until is None else events.filter(received_at__lte=until)


def _events_by_interaction(org: Organization, interactions: QuerySet[Interaction], until: datetime | None) -> dict:
    events = defaultdict(list)
    rows = _received_until(org, until).filter(interaction__in=interactions.values("pk")).values_list("interaction_id", "type", "value")
    for interaction_id, event_type, value in rows:
        events[interaction_id].append((event_type, value))
    return events


def _feedback_after(org: Organization, interactions: QuerySet[Interaction], rows: list[Interaction], since: datetime,
                    until: datetime | None) -> set:
    """The interactions that got feedback (their own, or their task's) received after `since`."""
    received = _received_until(org, until).filter(received_at__gt=since)
    own = set(received.filter(interaction__in=interactions.values("pk")).values_list("interaction_id", flat=True))
    tasks = set(received.filter(task__in=_tasks_of(interactions)).values_list("task_id", flat=True))
    return own | {i.pk for i in rows if i.task_id in tasks}


def _task_credit(org: Organization, interactions: QuerySet[Interaction], until: datetime | None) -> tuple[dict, dict]:
    """Each task's outcome, and each interaction's (position, number of steps) in its task."""
    outcome_events = _received_until(org, until).filter(task__in=_tasks_of(interactions), type=FeedbackEvent.Type.TASK_OUTCOME)
    outcomes = dict(outcome_events.values_list("task_id", "value"))
    by_task = defaultdict(list)
    for task_id, interaction_id in (Interaction.objects.for_org(org).filter(task__in=outcome_events.values("task_id"))
                                    .order_by("created_at", "pk").values_list("task_id", "pk")):
        by_task[task_id].append(interaction_id)
    steps = {interaction_id: (position, len(members)) for members in by_task.values()
             for position, interaction_id in enumerate(members)}
    return outcomes, steps


def _tasks_of(interactions: QuerySet[Interaction]) -> QuerySet:
    return interactions.exclude(task=None).values("task_id")


def _prompt_key(prompt_ids: list[int]) -> str:
    return hashlib.sha256(json.dumps(prompt_ids).encode()).hexdigest()[:16]


def share_lonely_groups(examples: list["engine.Example"], served_by: list[Hashable]) -> list["engine.Example"]:
    """An example alone with its prompt would get no advantage (nothing to compare it with):
    such examples share a baseline with the others that the same version served instead. One
    baseline per version, because an older version earns less on average: a baseline shared
    with it would credit the incumbent's answers for being newer, not for being better."""
    sizes = Counter(example.group for example in examples)
    return [example if sizes[example.group] > 1 else replace(example, group=(SHARED_GROUP, version))
            for example, version in zip(examples, served_by, strict=True)]


def _lineage_hash(ids: list[str], examples: list["engine.Example"]) -> str:
    digest = hashlib.sha256()
    for interaction_id, example in zip(ids, examples, strict=True):
        digest.update(json.dumps([interaction_id, example.reward, example.prompt_ids, example.completion_ids]).encode())
    return digest.hexdigest()
