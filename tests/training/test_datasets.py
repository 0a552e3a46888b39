"""The dataset of a training run: on-policy first, a bounded staleness, rewards from feedback,
the privacy policy respected, and lineage that names exactly what went in."""

from datetime import timedelta

import pytest
from django.utils import timezone

from serving import registry
from serving.models import AdapterVersion
from tenants.errors import Conflict
from tenants.models import FeedbackEvent, Interaction
from tenants.privacy import policy_update
from tenants.recording import task_create, task_outcome_record
from tests.factories import give, served, trained_adapter
from training.datasets import SHARED_GROUP, dataset_build
from training.rewards import RewardSpecValues

pytestmark = pytest.mark.usefixtures("adapters_root")

SPEC = RewardSpecValues(version=0, latency_penalty_per_s=0.0)


def versions(org, tmp_path, count) -> list[AdapterVersion]:
    """`count` versions deployed one after the other (each replaced the one before)."""
    made, previous = [], None
    for i in range(count):
        version = registry.adapter_register(org=org, source_dir=trained_adapter(tmp_path, name=f"v{i}"))
        version.replaced = previous
        version.save()
        made.append(version)
        previous = version
    return made


def test_on_policy_completions_get_the_rewards_of_their_feedback(acme, globex):
    good, bad = served(acme.org, feedback=("edit_accepted", "edit_persisted")), served(acme.org, feedback=("tool_call_invalid",))
    served(globex.org)
    dataset = dataset_build(org=acme.org, incumbent=None, spec=SPEC)
    assert dataset.interaction_ids == [str(good.pk), str(bad.pk)]  # never another organization's
    assert [e.reward for e in dataset.examples] == [pytest.approx(1.25), SPEC.weights["tool_call_invalid"]]
    assert all(e.behaviour_is_incumbent for e in dataset.examples) and dataset.off_policy == 0
    assert dataset.examples[0].sampled_logprobs == [-0.5, -0.25]


def test_one_version_back_is_off_policy_and_older_ones_are_left_out(acme, tmp_path):
    v1, v2, v3 = versions(acme.org, tmp_path, 3)
    old, previous, current = (served(acme.org, adapter=v.name) for v in (v1, v2, v3))
    dataset = dataset_build(org=acme.org, incumbent=v3, spec=SPEC)
    assert set(dataset.interaction_ids) == {str(previous.pk), str(current.pk)}
    by_id = dict(zip(dataset.interaction_ids, dataset.examples))
    assert by_id[str(current.pk)].behaviour_is_incumbent and not by_id[str(previous.pk)].behaviour_is_incumbent
    assert dataset.off_policy == 1 and str(old.pk) not in dataset.interaction_ids


def test_the_base_models_completions_are_one_version_back_of_the_first_adapter(acme, tmp_path):
    (v1,) = versions(acme.org, tmp_path, 1)
    base = served(acme.org)
    assert dataset_build(org=acme.org, incumbent=v1, spec=SPEC).interaction_ids == [str(base.pk)]
    assert dataset_build(org=acme.org, incumbent=v1, spec=SPEC, staleness=0).interaction_ids == []


def test_an_organization_that_has_not_opted_in_gets_no_dataset(globex):
    served(globex.org)
    with pytest.raises(Conflict, match="Training is off"):
        dataset_build(org=globex.org, incumbent=None, spec=SPEC)


def test_completions_without_feedback_or_tokens_are_skipped_with_the_reason(acme):
    served(acme.org, feedback=())
    served(acme.org, text="call me at +1 415 555 0100")  # redacted: its token ids would spell the number
    dataset = dataset_build(org=acme.org, incumbent=None, spec=SPEC)
    assert dataset.examples == []
    assert dataset.skipped == {"no feedback yet": 1, "no tokens (recorded through the API, or redacted)": 1}


def test_feedback_that_arrives_after_a_run_brings_its_interaction_into_the_next(acme):
    early = served(acme.org, feedback=("edit_accepted",))
    quiet = served(acme.org, feedback=("edit_accepted",))
    Interaction.objects.for_org(acme.org).update(created_at=timezone.now() - timedelta(hours=6))
    FeedbackEvent.objects.for_org(acme.org).update(received_at=timezone.now() - timedelta(hours=6))
    last_run = timezone.now() - timedelta(hours=1)
    give(acme.org, early, "edit_persisted")  # hours later, after the last run used it
    dataset = dataset_build(org=acme.org, incumbent=None, spec=SPEC, since=last_run)
    assert dataset.interaction_ids == [str(early.pk)] and str(quiet.pk) not in dataset.interaction_ids
    assert dataset.examples[0].reward == pytest.approx(1.25)  # all its feedback, old and new


def test_a_tasks_outcome_is_credited_to_its_steps(acme):
    task = task_create(org=acme.org)
    steps = [served(acme.org, task=task, feedback=()) for _ in range(4)]
    task_outcome_record(task=task, value=1.0, idempotency_key="done")
    dataset = dataset_build(org=acme.org, incumbent=None, spec=SPEC)
    assert dataset.interaction_ids == [str(s.pk) for s in steps]
    assert [e.reward for e in dataset.examples] == [pytest.approx(0.25)] * 4


def test_what_an_earlier_run_trained_on_is_replayed_unless_new_feedback_came_since(acme):
    trained, renewed = served(acme.org), served(acme.org, feedback=("edit_accepted",))
    last_run_end = timezone.now()
    give(acme.org, renewed, "edit_persisted")
    new = served(acme.org)
    dataset = dataset_build(org=acme.org, incumbent=None, spec=SPEC, fresh_since=last_run_end)
    replayed = {interaction_id: e.replayed for interaction_id, e in zip(dataset.interaction_ids, dataset.examples)}
    assert replayed == {str(trained.pk): True, str(renewed.pk): False, str(new.pk): False} and dataset.replayed == 1


def test_lonely_prompts_share_a_baseline_and_repeated_ones_keep_their_own(acme):
    served(acme.org, prompt=(1, 2)), served(acme.org, prompt=(1, 2)), served(acme.org, prompt=(9,))
    groups = [e.group for e in dataset_build(org=acme.org, incumbent=None, spec=SPEC).examples]
    assert groups[0] == groups[1] != groups[2] == (SHARED_GROUP, None)


def test_lonely_prompts_share_a_baseline_with_those_of_the_same_version_only(acme, tmp_path):
    v1, v2 = versions(acme.org, tmp_path, 2)
    served(acme.org, adapter=v1.name, prompt=(1,)), served(acme.org, adapter=v2.name, prompt=(2,))
    served(acme.org, adapter=v2.name, prompt=(3,))
    groups = [e.group for e in dataset_build(org=acme.org, incumbent=v2, spec=SPEC).examples]
    assert groups == [(SHARED_GROUP, v1.name), (SHARED_GROUP, v2.name), (SHARED_GROUP, v2.name)]


def test_the_lineage_hash_changes_with_what_went_in(acme):
    interaction = served(acme.org, feedback=("edit_accepted",))
    first = dataset_build(org=acme.org, incumbent=None, spec=SPEC).sha256
    assert dataset_build(org=acme.org, incumbent=None, spec=SPEC).sha256 == first
    give(acme.org, interaction, "edit_reverted")
    assert dataset_build(org=acme.org, incumbent=None, spec=SPEC).sha256 != first


def test_zero_retention_means_nothing_to_train_on(acme):
    policy_update(org=acme.org, changes={"store_content": False, "training_enabled": False}, actor="test")
    with pytest.raises(Conflict):
        dataset_build(org=acme.org, incumbent=None, spec=SPEC)


def test_held_out_interactions_never_train(acme, settings):
    settings.GATES_HOLDOUT_EVERY = 2
    made = [served(acme.org) for _ in range(12)]
    dataset = dataset_build(org=acme.org, incumbent=None, spec=SPEC)
    held = [i for i in made if i.pk.int % 2 == 0]
    assert held and dataset.skipped["held out for the tenant suite"] == len(held)
    assert set(dataset.interaction_ids) == {str(i.pk) for i in made} - {str(i.pk) for i in held}


def test_a_backlog_costs_what_trains_the_newest_within_the_limit_decrypted_and_no_more(acme, monkeypatch):
    from training import datasets

    rated = [served(acme.org, prompt=(i, 1)) for i in range(12)]
    opened = []
    interaction_content = datasets.interaction_content

    def counted(*, interaction):
        opened.append(interaction.pk)
        return interaction_content(interaction=interaction)

    monkeypatch.setattr(datasets, "interaction_content", counted)
    monkeypatch.setattr(datasets, "READ_CHUNK", 5)
    dataset = dataset_build(org=acme.org, incumbent=None, spec=SPEC, limit=4)
    assert dataset.interaction_ids == [str(i.pk) for i in rated[-4:]]  # the newest, oldest first
    assert sorted(opened) == sorted(i.pk for i in rated[-4:])  # only their content was opened
    assert dataset.skipped == {"beyond the run's limit (older)": 8}
