"""Data migrations: what organizations stored before a change is counted after it."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tenants.models import feedback_bit

BEFORE, AFTER = ("tenants", "0008_public_ids_unique"), ("tenants", "0009_feedback_and_tasks_count_against_the_quota")


@pytest.mark.django_db(transaction=True)
def test_feedback_and_tasks_stored_before_0009_count_against_the_quota_after_it():
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    apps = executor.loader.project_state([BEFORE]).apps
    Organization, Interaction, FeedbackEvent, BackgroundTask, StorageUsage = (
        apps.get_model("tenants", name) for name in ("Organization", "Interaction", "FeedbackEvent", "BackgroundTask", "StorageUsage"))
    recorded, tasks_only = Organization.objects.create(slug="recorded", name="r"), Organization.objects.create(slug="tasks", name="t")
    interaction = Interaction.objects.create(org=recorded, source="api")
    StorageUsage.objects.create(org=recorded, used_bytes=512)
    task = BackgroundTask.objects.create(org=tasks_only)
    for key, about in (("a", {"interaction": interaction}), ("b", {"interaction": interaction})):
        FeedbackEvent.objects.create(org=recorded, type="edit_persisted", idempotency_key=key, occurred_at="2026-01-01T00:00Z",
                                     received_at="2026-01-01T00:00Z", **about)
    FeedbackEvent.objects.create(org=tasks_only, task=task, type="task_outcome", value=1.0, idempotency_key="t",
                                 occurred_at="2026-01-01T00:00Z", received_at="2026-01-01T00:00Z")

    executor = MigrationExecutor(connection)
    executor.migrate([AFTER])
    apps = executor.loader.project_state([AFTER]).apps
    used = dict(apps.get_model("tenants", "StorageUsage").objects.values_list("org__slug", "used_bytes"))
    assert used == {"recorded": 512 + 2 * 256, "tasks": 64 + 256}

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # the rest of the suite runs on the latest schema


@pytest.mark.django_db(transaction=True)
def test_interactions_stored_before_0011_know_the_kinds_of_feedback_they_got():
    before, after = ("tenants", "0010_invitations"), ("tenants", "0011_interactions_know_their_kinds_of_feedback")
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    apps = executor.loader.project_state([before]).apps
    Organization, Interaction, FeedbackEvent = (apps.get_model("tenants", name) for name in ("Organization", "Interaction", "FeedbackEvent"))
    org = Organization.objects.create(slug="old", name="o")
    persisted_twice, dissatisfied, none = (Interaction.objects.create(org=org, source="api") for _ in range(3))
    for key, interaction, kind in (("a", persisted_twice, "edit_persisted"), ("b", persisted_twice, "edit_persisted"),
                                   ("c", dissatisfied, "dissatisfied_followup"), ("d", dissatisfied, "edit_accepted")):
        FeedbackEvent.objects.create(org=org, interaction=interaction, type=kind, idempotency_key=key,
                                     occurred_at="2026-01-01T00:00Z", received_at="2026-01-01T00:00Z")

    executor = MigrationExecutor(connection)
    executor.migrate([after])
    seen = dict(executor.loader.project_state([after]).apps.get_model("tenants", "Interaction").objects.values_list("pk", "feedback_seen"))
    assert seen == {persisted_twice.pk: feedback_bit("edit_persisted"),
                    dissatisfied.pk: feedback_bit("dissatisfied_followup") | feedback_bit("edit_accepted"), none.pk: 0}

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_bits_of_kinds_of_feedback_never_move():
    # Stored in every interaction: a new kind goes at the end of FeedbackEvent.Type.
    assert [feedback_bit(kind) for kind in ("edit_accepted", "edit_persisted", "dissatisfied_followup", "tool_call_invalid", "task_outcome")] \
        == [1, 4, 16, 64, 256]
