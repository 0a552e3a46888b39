"""Erasure reaches the adapters: versions trained on erased, purged or zero-retention content,
and their descendants, are tainted; under the retrain policy the next cycle trains from the
newest untainted ancestor on what is left, and the tainted versions are retired (weights
deleted) once a clean one serves; under keep they serve on, audited.

Training is real (the tiny model); replicas and the gates' verdict are stood in for, as in
test_cycles.py.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from serving import deployments, registry, taint
from serving.models import AdapterVersion, TrainedOn
from serving.registry import route_of
from tenants.errors import Conflict
from tenants.models import Interaction
from tenants.privacy import policy_update
from tenants.recording import interaction_erase
from tenants.retention import content_purge_expired
from tests.factories import make_tenant, served, trained_adapter
from tests.training.test_cycles import gate_verdict, replicas  # noqa: F401 - fixtures
from training import cycles, runs
from training.models import Cycle, TrainingRun

Status = AdapterVersion.Status


def deployed_version(org, served_by: str | None, seed: int) -> tuple[AdapterVersion, list[Interaction]]:
    """Traffic served by `served_by`, rated; a run on it; its candidate deployed."""
    own = [served(org, adapter=served_by, prompt=(seed, 2, 3), feedback=(kind,))
           for kind in ("edit_persisted", "edit_reverted", "edit_persisted", "edit_rejected")]
    run = runs.run_execute(str(runs.run_request(org=org, trigger=TrainingRun.Trigger.REQUEST, actor="test").pk))
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    deployments.adapter_deploy(adapter=run.candidate, actor="test")
    return run.candidate, own


@pytest.fixture
def three_versions(acme, training, sent, replicas, django_capture_on_commit_callbacks):  # noqa: F811
    """acme's v1 (from the base), v2 (from v1) and v3 (from v2), v3 serving; no run replays an
    earlier one's data, so that v3 is tainted through its parent alone."""
    training.TRAINING_REPLAY_RUNS = 0
    with django_capture_on_commit_callbacks(execute=True):
        v1, _ = deployed_version(acme.org, None, 1)
        v2, trained_v2 = deployed_version(acme.org, v1.name, 2)
        v3, _ = deployed_version(acme.org, v2.name, 3)
    assert (v2.parent, v3.parent) == (v1, v2) and route_of(org=acme.org).serving == v3
    assert {str(i.pk) for i in trained_v2} <= set(map(str, v2.trained_on.values_list("interaction_id", flat=True)))
    sent.clear()
    return v1, v2, v3, trained_v2


def refreshed(*versions):
    for version in versions:
        version.refresh_from_db()
    return versions


def test_erasing_what_trained_v2_retrains_from_v1_and_retires_v2_and_v3(acme, three_versions, sent, monkeypatch, settings,
                                                                         django_capture_on_commit_callbacks):
    v1, v2, v3, trained_v2 = three_versions
    erased = str(trained_v2[0].pk)
    with django_capture_on_commit_callbacks(execute=True):
        interaction_erase(interaction=trained_v2[0], actor="admin@acme")

    v1, v2, v3 = refreshed(v1, v2, v3)
    assert v1.tainted_at is None
    assert v2.taint == {"erased": 1} and v3.taint == {"via": v2.name} and v2.tainted_at and v3.tainted_at
    tainted = acme.org.audit_events.filter(action="adapter.tainted").order_by("target")
    assert [(e.target, e.after["policy"]) for e in tainted] == [(v2.name, "retrain"), (v3.name, "retrain")]
    retrain = Cycle.objects.for_org(acme.org).get()  # started at once, by the erasure
    assert retrain.trigger == TrainingRun.Trigger.ERASURE and sent == [str(retrain.pk)]

    gate_verdict(monkeypatch)
    settings.TRAINING_REPLAY_RUNS = 2  # the window reaches back to what v2 was trained on
    fresh = [served(acme.org, adapter=v3.name, prompt=(4, 2, 3), feedback=(kind,)) for kind in ("edit_persisted", "edit_reverted")]
    cycles.cycle_advance(str(retrain.pk))
    retrain.refresh_from_db()
    run = runs.run_execute(str(retrain.training_run.pk))
    assert run.parent == v1 and run.incumbent == v3  # trained from the newest untainted ancestor
    assert erased not in run.interaction_ids  # its lineage proves the erased data is not in it
    assert {str(i.pk) for i in trained_v2[1:] + fresh} <= set(run.interaction_ids)  # what v2 learnt from, less the erased, again
    v4 = run.candidate
    assert v4.parent == v1 and v4.tainted_at is None
    assert erased not in set(map(str, v4.trained_on.values_list("interaction_id", flat=True)))

    cycles.run_ended(run)
    with django_capture_on_commit_callbacks(execute=True):
        cycles.cycle_advance(str(retrain.pk))  # gates pass: canary
        assert Cycle.objects.for_org(acme.org).get().status == Cycle.Status.CANARY
        assert refreshed(v2)[0].weights_deleted_at is None  # nothing retires while the tainted version still serves
        deployments.adapter_deploy(adapter=v4, actor="admin@acme")  # promoted (by hand, here)

    v2, v3 = refreshed(v2, v3)
    assert (v2.status, v3.status) == (Status.RETIRED, Status.RETIRED) and v2.weights_deleted_at and v3.weights_deleted_at
    assert not registry.adapter_files(v2).exists() and not registry.adapter_files(v3).exists()
    assert registry.adapter_files(v1).exists()
    assert deployments.rollback_target(v4) == v1  # a rollback never returns to what erasure reached
    assert v2.name not in deployments.routed_adapters() and v3.name not in deployments.routed_adapters()
    with pytest.raises(Conflict, match="erased"):
        deployments.adapter_deploy(adapter=v3, actor="admin@acme")


@pytest.mark.parametrize("how", ["purged", "zero_retention"])
def test_retention_purge_and_zero_retention_taint_the_same_way(acme, three_versions, how, django_capture_on_commit_callbacks):
    v1, v2, v3, trained_v2 = three_versions
    with django_capture_on_commit_callbacks(execute=True):
        if how == "purged":
            Interaction.objects.for_org(acme.org).filter(pk=trained_v2[1].pk).update(created_at=timezone.now() - timedelta(days=40))
            assert content_purge_expired(org=acme.org) == 1
        else:
            policy_update(org=acme.org, changes={"store_content": False, "training_enabled": False}, actor="admin@acme")
    v1, v2, v3 = refreshed(v1, v2, v3)
    if how == "purged":
        assert v1.tainted_at is None and v2.taint == {"purged": 1} and v3.taint == {"via": v2.name}
        assert Cycle.objects.for_org(acme.org).get().trigger == TrainingRun.Trigger.ERASURE
    else:  # every stored text is gone: every version trained here is tainted, and nothing can train
        assert v1.taint == {"zero_retention": 4} and v2.taint == {"zero_retention": 4} and v3.taint["zero_retention"] == 4
        assert not Cycle.objects.for_org(acme.org).exists()


def test_under_keep_tainted_versions_serve_on_and_are_never_a_parent(acme, three_versions, monkeypatch,
                                                                    django_capture_on_commit_callbacks):
    v1, v2, v3, trained_v2 = three_versions
    policy_update(org=acme.org, changes={"tainted_adapters": "keep"}, actor="admin@acme")
    assert acme.org.audit_events.filter(action="privacy_policy.update").latest("at").after["tainted_adapters"] == "keep"
    with django_capture_on_commit_callbacks(execute=True):
        interaction_erase(interaction=trained_v2[0], actor="admin@acme")
    v2, v3 = refreshed(v2, v3)
    assert v2.tainted_at and v3.tainted_at
    assert acme.org.audit_events.get(action="adapter.tainted", target=v3.name).after == {"via": v2.name, "policy": "keep"}
    assert not Cycle.objects.for_org(acme.org).exists()  # nothing retrains by itself
    deployments.adapter_deploy(adapter=v2, actor="admin@acme")  # the admin may serve a tainted version again
    assert route_of(org=acme.org).serving == v2 and registry.adapter_files(v3).exists()

    served(acme.org, adapter=v2.name, prompt=(5, 2, 3), feedback=("edit_persisted",))
    served(acme.org, adapter=v2.name, prompt=(5, 2, 3), feedback=("edit_rejected",))
    run = runs.run_execute(str(runs.run_request(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, actor="t").pk))
    assert run.status == TrainingRun.Status.SUCCEEDED, run.error
    assert run.parent == v1 and run.candidate.parent == v1  # still never trained from


def test_a_version_registered_after_its_data_was_erased_is_tainted_at_once(acme, adapters_root, tmp_path, sent):
    kept, erased = served(acme.org), served(acme.org)
    lineage = [str(kept.pk), str(erased.pk)]
    interaction_erase(interaction=erased, actor="admin@acme")
    version = registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, name="a"), interaction_ids=lineage)
    assert version.taint == {"erased": 1} and version.tainted_at is not None
    assert acme.org.audit_events.get(action="adapter.tainted").target == version.name

    child = registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, name="b"), parent=version,
                                      interaction_ids=[str(kept.pk)])
    assert child.taint == {"via": version.name}
    assert taint.untainted_ancestor(child) is None


def test_erasure_in_one_organization_taints_nothing_of_another(acme, adapters_root, tmp_path, sent):
    globex = make_tenant("Globex", training_enabled=True)
    theirs = served(globex.org)
    ours = registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, name="a"), interaction_ids=[str(served(acme.org).pk)])
    # A lineage row naming another organization's interaction (it cannot happen; if it did) is not reached.
    TrainedOn.objects.for_org(acme.org).create(org=acme.org, adapter=ours, interaction_id=theirs.pk)
    interaction_erase(interaction=theirs, actor="admin@globex")
    ours.refresh_from_db()
    assert ours.tainted_at is None


@pytest.mark.parametrize(("policy", "claim"), [("retrain", "non_inferior"), ("keep", "better")])
def test_a_canary_replacing_a_tainted_incumbent_asks_only_that_the_candidate_is_as_good(acme, three_versions, tmp_path, policy,
                                                                                        claim):
    from serving import canary
    from tests.training.test_cycles import arm_traffic

    v1, v2, v3, trained_v2 = three_versions
    policy_update(org=acme.org, changes={"tainted_adapters": policy}, actor="admin@acme")
    interaction_erase(interaction=trained_v2[0], actor="admin@acme")
    v3.refresh_from_db()
    candidate = registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, name="c"), parent=v1)
    started = timezone.now() - timedelta(minutes=1)
    arm_traffic(acme.org, candidate.name, served=40, persisted=0.3, dissatisfied=0.2, seed=1)
    arm_traffic(acme.org, v3.name, served=40, persisted=0.3, dissatisfied=0.2, seed=2)
    report = canary.canary_evaluate(org=acme.org, candidate=candidate, incumbent=v3, since=started,
                                    policy=canary.canary_policy_for(acme.org))
    persisted = next(check for check in report.checks if check.name == "edit_persisted_rate")
    assert persisted.sequential["tests"][0]["claim"] == claim
