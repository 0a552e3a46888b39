"""Reads of an organization's training lists, for the API and the console alike."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from tenants.models import Organization
from training.models import Cycle, TrainingRun


def training_runs_list(*, org: Organization) -> QuerySet[TrainingRun]:
    """Without each run's lineage (its interaction ids): a list shows counts, a run's page the ids."""
    return TrainingRun.objects.for_org(org).select_related("incumbent", "parent", "candidate").defer("interaction_ids")


def cycles_list(*, org: Organization) -> QuerySet[Cycle]:
    return Cycle.objects.for_org(org).select_related("candidate", "incumbent")


@dataclass(frozen=True)
class Training:
    """How an adapter version came to be: the cycle that trained it, and on how many examples."""

    cycle_id: uuid.UUID | None  # None: trained by a run outside a cycle
    examples: int | None


def adapters_training(*, org: Organization) -> dict[uuid.UUID, Training]:
    """Per adapter version trained here (by its id): its cycle and dataset size, in one query."""
    runs = (TrainingRun.objects.for_org(org).filter(candidate__isnull=False)
            .values_list("candidate_id", "cycle__id", "dataset"))
    return {adapter_id: Training(cycle_id, (dataset or {}).get("examples")) for adapter_id, cycle_id, dataset in runs}


@dataclass(frozen=True)
class RunReward:
    """What one training window's traffic earned: the mean reward of the run's new examples."""

    finished_at: datetime
    candidate: str | None
    examples: int
    mean_reward: float


def rewards_per_run(*, org: Organization, since: datetime) -> list[RunReward]:
    """Runs that finished since `since`, oldest first, with the mean reward of what they trained on
    (runs from before it was kept have none, and are left out)."""
    runs = (TrainingRun.objects.for_org(org).filter(status=TrainingRun.Status.SUCCEEDED, finished_at__gte=since)
            .order_by("finished_at").values_list("finished_at", "candidate__name", "dataset"))
    return [RunReward(finished_at, candidate, dataset["examples"], dataset["mean_reward"])
            for finished_at, candidate, dataset in runs if (dataset or {}).get("mean_reward") is not None]
