"""Training runs: requested by a cycle (training/cycles.py) or by an admin, executed by a Celery
worker, each ending in exactly one candidate adapter version or a stated failure.

    run_request   QUEUED; one active run per organization (a database constraint)
    run_execute   claim: compare-and-set QUEUED -> RUNNING, or take over a RUNNING run whose
                  heartbeat stopped (its worker died), as attempt n + 1
                  dataset of the run's fixed window -> engine.train, checkpointing in the run's
                  work dir, so that a later attempt resumes where the last one stopped
                  register the candidate and mark SUCCEEDED in one transaction, only while this
                  attempt still holds the run: a run yields one adapter version, never two
    runs_recover  resend the runs whose worker died or whose message was lost

Every write to a claimed run names the attempt (`attempts = n`), so an attempt that lost its
run to another does nothing more to it.

Fairness: an organization has at most one active run, hence at most one training message in
the queue, and a run trains on at most TRAINING_MAX_EXAMPLES examples: workers taking messages
in order take organizations in turn, and no organization's backlog holds a worker for long.
"""

import json
import logging
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, IntegrityError, InterfaceError, OperationalError, connections, transaction
from django.db.models import F, Model, Q
from django.utils import timezone

from serving.gates import thresholds_for
from serving.registry import adapter_files, adapter_register, base_model_dir, route_of
from serving.suite_samples import global_suite
from serving.taint import untainted_ancestor
from tenants import transactions
from tenants.audit import audit_record
from tenants.errors import Conflict, DomainError, NotFound
from tenants.models import Organization
from tenants.privacy import trainable_check
from training import engine
from training.datasets import STALENESS_VERSIONS, dataset_build, served_since
from training.models import TrainingRun
from training.rewards import reward_spec_get
from training.steps import step_choose

log = logging.getLogger(__name__)

Status = TrainingRun.Status
TRAIN_TASK = "training.tasks.train_run"


# Requests and triggers


def run_request(*, org: Organization, trigger: str, actor: str) -> TrainingRun:
    """Queue a run for the organization; refused while training is off or another run is active."""
    trainable_check(org=org)
    return queue_one(TrainingRun, "training_run", org=org, trigger=trigger, actor=actor, task=TRAIN_TASK,
                     enqueued_at=timezone.now())


def queue_one(model: type[Model], kind: str, *, org: Organization, trigger: str, actor: str, task: str, **fields):
    """Create the organization's one active run or cycle (`kind` in the audit log), audit it and
    send its task once committed; Conflict naming the active one when there is one already (a
    database constraint, so two requests at once cannot both win)."""
    try:
        with transaction.atomic():
            created = model.objects.create(org=org, trigger=trigger, requested_by=actor, **fields)
            audit_record(org=org, actor=actor, action=f"{kind}.request", target=str(created.pk), after={"trigger": trigger})
            transactions.send_on_commit(task, created.pk)
    except IntegrityError:
        active = model.objects.for_org(org).filter(status__in=model.ACTIVE).first()
        noun = kind.replace("_", " ")
        raise Conflict(f"A {noun} is already active for this organization: {active.pk if active else 'finishing'}.",
                       details={f"active_{kind.removeprefix('training_')}": str(active.pk) if active else None}) from None
    return created


def runs_recover(*, now: datetime | None = None) -> list[str]:
    """Resend the runs that would otherwise wait forever: running with a stopped heartbeat (the
    worker died: resent at once, then every TRAINING_REQUEUE_S while no worker takes it up), or
    queued since long after their last send (the message was lost). A resent run that someone
    holds after all is a no-op for the attempt that gets it."""
    now = now or timezone.now()
    resend_due = Q(enqueued_at__lt=now - timedelta(seconds=settings.TRAINING_REQUEUE_S))
    lost = TrainingRun.objects.across_orgs().filter(
        Q(status=Status.RUNNING, heartbeat_at__lt=now - timedelta(seconds=settings.TRAINING_LEASE_S))
        & (Q(enqueued_at__lt=F("heartbeat_at")) | resend_due)
        | Q(status=Status.QUEUED) & resend_due
    )
    resent = []
    for run in lost:
        TrainingRun.objects.across_orgs().filter(pk=run.pk).update(enqueued_at=now)
        transactions.send(TRAIN_TASK, run.pk)
        resent.append(str(run.pk))
    if resent:
        log.warning("Resent %d training runs whose worker or message was lost: %s", len(resent), ", ".join(resent))
    return resent


# Execution


def run_execute(run_id: str) -> TrainingRun | None:
    """Claim the run and carry it to its end; None when it was not ours to run (done already,
    or held by a live attempt). The Celery task's body."""
    run = _claim(run_id)
    if run is None:
        return None
    attempt = run.attempts
    log.info("Training run %s of %s: attempt %d", run.pk, run.org.slug, attempt)
    try:
        with _heartbeat(run.pk, attempt):
            adapter_dir, report = _train(run)
            return _register(run, adapter_dir, report)
    except DomainError as error:
        return _fail(run, error.message)
    except (OperationalError, InterfaceError) as error:
        # The database went away (restarting, unreachable): not the run's fault. It stays held
        # until its lease runs out, and the next attempt resumes from the checkpoint.
        log.warning("Training run %s: attempt %d lost the database (%s); the run is left to the next attempt", run.pk, attempt, error)
        return None
    except Exception as error:
        log.exception("Training run %s failed", run.pk)
        return _fail(run, f"{type(error).__name__}: {error}")


def _claim(run_id: str) -> TrainingRun | None:
    run = TrainingRun.objects.across_orgs().select_related("org", "incumbent", "parent").filter(pk=run_id).first()
    now = timezone.now()
    if run is None:
        return None
    lost_worker = run.status == Status.RUNNING and run.heartbeat_at is not None and \
        run.heartbeat_at < now - timedelta(seconds=settings.TRAINING_LEASE_S)
    if run.status != Status.QUEUED and not lost_worker:
        return None
    if run.attempts >= settings.TRAINING_MAX_ATTEMPTS:
        _fail(run, f"Gave up after {run.attempts} attempts: each one's worker stopped before the run ended.")
        return None
    claimed = TrainingRun.objects.across_orgs().filter(pk=run.pk, status=run.status, attempts=run.attempts).update(
        status=Status.RUNNING, attempts=F("attempts") + 1, heartbeat_at=now, started_at=run.started_at or now,
    )
    if not claimed:  # another attempt claimed it between our read and our write
        return None
    run.refresh_from_db()
    if run.until is None:
        _fix_window(run, now)
    return run


def _fix_window(run: TrainingRun, now: datetime) -> None:
    """What the run trains from and on, decided once: every later attempt builds the same dataset.
    It trains from the incumbent, or, when erasure tainted it, from its newest untainted ancestor
    (serving/taint.py)."""
    run.incumbent = route_of(org=run.org).serving
    run.parent = untainted_ancestor(run.incumbent)
    run.reward_spec_version = reward_spec_get(org=run.org).version
    run.since, run.until = last_window_end(run.org, back=settings.TRAINING_REPLAY_RUNS), now
    _save_if_held(run, "incumbent", "parent", "reward_spec_version", "since", "until")


def last_window_end(org: Organization, *, back: int = 0) -> datetime | None:
    """Where the last succeeded run's window ended; with `back`, where the window of the run that
    many before it ended, so that a new run trains on those runs' data again (replay)."""
    ends = TrainingRun.objects.for_org(org).filter(status=Status.SUCCEEDED).order_by("-until").values_list("until", flat=True)
    return next(iter(ends[back : back + 1]), None)


def _train(run: TrainingRun) -> tuple[Path, dict]:
    spec = reward_spec_get(org=run.org, version=run.reward_spec_version)
    # Replayed windows reach one version further back each: their data was served by those versions.
    # The last run's end cannot move while this run is active (one at a time): every attempt agrees on it.
    # From past tainted versions, every version since the parent served what trains (the same window and replay).
    behaviours = served_since(run.incumbent, run.parent) if run.parent_id != run.incumbent_id else None
    dataset = dataset_build(org=run.org, incumbent=run.incumbent, spec=spec, since=run.since, until=run.until,
                            staleness=STALENESS_VERSIONS + settings.TRAINING_REPLAY_RUNS, fresh_since=last_window_end(run.org),
                            limit=settings.TRAINING_MAX_EXAMPLES, behaviours=behaviours)
    run.interaction_ids, run.dataset_sha256 = dataset.interaction_ids, dataset.sha256
    fresh = [e.reward for e in dataset.examples if not e.replayed]  # what the window's traffic earned, under the run's spec
    run.dataset = {"examples": len(dataset.examples), "off_policy": dataset.off_policy, "replayed": dataset.replayed,
                   "skipped": dataset.skipped, "mean_reward": round(sum(fresh) / len(fresh), 4) if fresh else None}
    _save_if_held(run, "interaction_ids", "dataset_sha256", "dataset")
    if len(dataset.examples) == dataset.replayed:  # none, or only what earlier runs trained on
        raise Conflict(f"Nothing to train on: no interaction since the last run has both feedback and stored tokens "
                       f"(left out: {dataset.skipped or 'none'}).")
    work = run_work_dir(run)
    adapter_dir, report_file = work / "adapter", work / "report.json"
    if adapter_dir.exists():  # an earlier attempt finished training and died before registering
        return adapter_dir, json.loads(report_file.read_text()) if report_file.exists() else {}
    config = engine.TrainConfig.from_dict({**settings.TRAINING_CONFIG, "kl_coef": spec.kl_coef, "seed": run.pk.int % 2**31,
                                           "device": settings.TRAINING_DEVICE})
    engine.use_cpu_threads(settings.TRAINING_CPU_THREADS)  # for the training and the step search alike
    incumbent_dir = adapter_files(run.parent) if run.parent else None  # what it trains from
    trained = work / "trained"
    if trained.exists():  # an earlier attempt trained it and died in the step search
        summary = json.loads(report_file.read_text()) if report_file.exists() else {}
    else:
        report = engine.train(
            base_model_dir=base_model_dir(), incumbent_adapter_dir=incumbent_dir,
            examples=dataset.examples, out_dir=trained, base_model_name=settings.SERVING_BASE_MODEL_NAME,
            config=config, checkpoint_dir=work / "checkpoint",
        )
        summary = {**asdict(report), "adapter_dir": None}
        report_file.write_text(json.dumps(summary))
    kept = trained
    if settings.TRAINING_STEP_SEARCH:
        choice = step_choose(suite=global_suite(), base_model_dir=base_model_dir(), incumbent_adapter_dir=incumbent_dir,
                             trained_adapter_dir=trained, work_dir=work, tolerance=thresholds_for(run.org).invalid_tool_call_rate,
                             seed=config.seed, device=settings.TRAINING_DEVICE)
        kept, summary["step"] = choice.adapter_dir, choice.as_dict()
        report_file.write_text(json.dumps(summary))
    kept.rename(adapter_dir)  # last: an adapter_dir says the attempt's work is done
    return adapter_dir, summary


def run_work_dir(run: TrainingRun) -> Path:
    """Shared by the run's attempts (a later one resumes from the checkpoints here), inside its
    organization's folder, which goes when the organization does."""
    return org_work_dir(run.org_id) / str(run.pk)


def org_work_dir(org_id) -> Path:
    return Path(settings.TRAINING_WORK_DIR) / str(org_id)


def org_work_destroy(*, org_id, **_) -> None:
    """Remove a deleted organization's weights and checkpoints (connected to tenants'
    organization_deleted). An attempt still training when it went removes its own at its end."""
    shutil.rmtree(org_work_dir(org_id), ignore_errors=True)


def _register(run: TrainingRun, adapter_dir: Path, report: dict) -> TrainingRun | None:
    """The candidate's registration and the run's success, in one transaction that first checks
    (compare-and-set) that this attempt still holds the run."""
    now = timezone.now()
    with transaction.atomic():
        if not _held(run).update(status=Status.SUCCEEDED, finished_at=now, heartbeat_at=None, report=report):
            log.warning("Training run %s: attempt %d lost the run before registering; its adapter is dropped", run.pk, run.attempts)
            _drop_work_if_orphaned(run)
            return None
        candidate = adapter_register(org=run.org, source_dir=adapter_dir, parent=run.parent, dataset_sha256=run.dataset_sha256,
                                     interaction_ids=run.interaction_ids, reward_spec_version=run.reward_spec_version)
        TrainingRun.objects.for_org(run.org).filter(pk=run.pk).update(candidate=candidate)
        audit_record(org=run.org, actor="training", action="training_run.succeeded", target=str(run.pk),
                     after={"candidate": candidate.name, "examples": len(run.interaction_ids)})
    shutil.rmtree(run_work_dir(run), ignore_errors=True)
    run.refresh_from_db()
    log.info("Training run %s of %s: candidate %s", run.pk, run.org.slug, candidate.name)
    return run


def _fail(run: TrainingRun, reason: str) -> TrainingRun | None:
    """Fail the run if this attempt still holds it. The work folder goes only then (or when the
    run is gone with its organization): a losing attempt must not wipe the winner's checkpoints."""
    with transaction.atomic():
        failed = TrainingRun.objects.for_org(run.org).filter(pk=run.pk, status__in=TrainingRun.ACTIVE, attempts=run.attempts)
        ended = failed.update(status=Status.FAILED, error=reason, finished_at=timezone.now(), heartbeat_at=None)
        if ended:
            audit_record(org=run.org, actor="training", action="training_run.failed", target=str(run.pk), after={"error": reason})
    if not ended:
        log.warning("Training run %s: attempt %d failed (%s) after losing the run; its work is left to the run", run.pk,
                    run.attempts, reason)
        _drop_work_if_orphaned(run)
        return None
    shutil.rmtree(run_work_dir(run), ignore_errors=True)
    run.refresh_from_db()
    return run


def _drop_work_if_orphaned(run: TrainingRun) -> None:
    if not TrainingRun.objects.across_orgs().filter(pk=run.pk).exists():  # deleted with its organization
        shutil.rmtree(run_work_dir(run), ignore_errors=True)


def _held(run: TrainingRun):
    """The run's row while this attempt holds it: the filter of every compare-and-set."""
    return TrainingRun.objects.for_org(run.org).filter(pk=run.pk, status=Status.RUNNING, attempts=run.attempts)


def _save_if_held(run: TrainingRun, *fields: str) -> None:
    if not _held(run).update(**{name: getattr(run, name) for name in fields}):
        raise Conflict("Another attempt took over this run.")


@contextmanager
def _heartbeat(run_id, attempt: int) -> Iterator[None]:
    """Beat every quarter lease from a thread of its own, while the training thread is busy in torch."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.TRAINING_LEASE_S / 4):
                held = TrainingRun.objects.across_orgs().filter(pk=run_id, status=Status.RUNNING, attempts=attempt)
                try:
                    beating = held.update(heartbeat_at=timezone.now())
                except DatabaseError as error:  # locked, restarting, unreachable: the next beat tries again
                    log.warning("Training run %s: attempt %d could not beat (%s); trying again", run_id, attempt, error)
                    connections.close_all()  # a fresh connection for the next beat
                    continue
                if not beating:
                    log.warning("Training run %s: attempt %d no longer holds the run", run_id, attempt)
                    return
        finally:
            connections.close_all()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"heartbeat-{run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_get(*, org: Organization, run_id) -> TrainingRun:
    run = TrainingRun.objects.for_org(org).select_related("incumbent", "parent", "candidate").filter(pk=run_id).first()
    if run is None:
        raise NotFound("No such training run in this organization.")
    return run
