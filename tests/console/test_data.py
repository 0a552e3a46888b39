"""The organization's data in the console: interactions (filters, cursor pages, content as
stored), one interaction with its feedback, erasure, background tasks, the audit log, the
export link, and deleting the organization."""

import base64
import json
import uuid

from django.utils import timezone

from console import paging
from tenants.models import AuditEvent, Interaction, Organization
from tenants.recording import task_create
from tests.factories import record, served


def test_interactions_show_their_text_as_stored_redacted(acme, acme_viewer):
    record(acme.client, text="Task: mail alice@example.com the report", completion="<ask>Which report?</ask>")
    page = acme_viewer.client.get("/console/interactions/").content.decode()
    assert "Which report?" in page and "alice@example.com" not in page and "[REDACTED:email]" in page


def test_interactions_filter_by_served_version_feedback_and_task(acme, acme_viewer):
    task = task_create(org=acme.org)
    on_base = served(acme.org, text="base answer", feedback=("edit_persisted",))
    on_v1 = served(acme.org, adapter="acme@v1", text="adapter answer", feedback=("dissatisfied_followup",), task=task)
    client = acme_viewer.client

    def shown(**query) -> set:
        rows = client.get("/console/interactions/", query).context["rows"]
        return {row.pk for row in rows}

    assert shown() == {on_base.pk, on_v1.pk}
    assert shown(served_by="base") == {on_base.pk}
    assert shown(served_by="acme@v1") == {on_v1.pk}
    assert shown(feedback="dissatisfied_followup") == {on_v1.pk}
    assert shown(task=str(task.pk)) == {on_v1.pk}
    assert client.get("/console/interactions/", {"task": "nope"}).status_code == 400


def test_interactions_page_by_cursor_newest_first(acme, acme_viewer, monkeypatch):
    made = [served(acme.org, feedback=()).pk for _ in range(5)]
    monkeypatch.setattr(paging, "PAGE_SIZE", 2)
    seen, cursor, pages = [], None, 0
    while True:
        response = acme_viewer.client.get("/console/interactions/", {"cursor": cursor} if cursor else {})
        seen += [row.pk for row in response.context["rows"]]
        pages += 1
        cursor = response.context["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    order = list(Interaction.objects.for_org(acme.org).order_by("-created_at", "-pk").values_list("pk", flat=True))
    assert seen == order and set(seen) == set(made)


def test_a_cursor_the_console_did_not_give_is_400(acme_viewer):
    for cursor in ("garbage", "W10=", "WyJ4IiwgMV0="):
        assert acme_viewer.client.get("/console/interactions/", {"cursor": cursor}).status_code == 400
        assert acme_viewer.client.get("/console/audit-log/", {"cursor": cursor}).status_code == 400


def test_a_cursor_whose_id_its_list_cannot_read_is_400_on_every_list(acme_viewer):
    """The id goes into the page's query: one its field cannot read failed the query."""
    cursor = paging._encoded(timezone.now(), "not-an-id")
    for page in ("/console/interactions/", "/console/tasks/", "/console/cycles/", "/console/audit-log/"):
        assert acme_viewer.client.get(page, {"cursor": cursor}).status_code == 400, page


def test_the_audit_logs_pages_tell_nothing_of_how_many_events_other_organizations_have(acme, globex, acme_viewer):
    """Its pk is one sequence for every organization: two cursors of it, a few minutes apart,
    would count everyone else's audited changes."""
    for number in range(paging.PAGE_SIZE + 5):
        AuditEvent.objects.create(org=acme.org, actor="test", action=f"test.{number}")
    first = acme_viewer.client.get("/console/audit-log/").context
    _, key = json.loads(base64.urlsafe_b64decode(first["next_cursor"]))
    assert not key.isdigit() and uuid.UUID(key)
    second = acme_viewer.client.get("/console/audit-log/", {"cursor": first["next_cursor"]}).context
    shown = [row.pk for row in first["rows"]] + [row.pk for row in second["rows"]]
    assert len(shown) == len(set(shown)) == AuditEvent.objects.for_org(acme.org).count()


def test_one_interaction_shows_its_content_and_feedback(acme_viewer, acme_interaction):
    page = acme_viewer.client.get(f"/console/interactions/{acme_interaction.pk}/").content.decode()
    assert "Which file?" in page and "edit_accepted" in page and "edit_persisted" in page
    assert "Erase this interaction" not in page


def test_an_admin_erases_an_interaction_after_confirming(acme, acme_admin, acme_interaction):
    url = f"/console/interactions/{acme_interaction.pk}/erase/"
    assert b"cannot be undone" in acme_admin.client.get(url).content
    assert Interaction.objects.for_org(acme.org).filter(pk=acme_interaction.pk).exists()
    acme_admin.client.post(url)
    assert not Interaction.objects.for_org(acme.org).filter(pk=acme_interaction.pk).exists()
    assert AuditEvent.objects.for_org(acme.org).filter(action="interaction.erase", actor=f"user:{acme_admin.email}").exists()


def test_a_task_shows_its_steps_in_order_and_its_outcome(acme, acme_viewer):
    task = task_create(org=acme.org)
    first = served(acme.org, text="<ask>first</ask>", task=task, feedback=())
    second = served(acme.org, text="<ask>second</ask>", task=task, feedback=())
    acme.client.post(f"/api/v1/tasks/{task.pk}/outcome", {"value": 0.75, "idempotency_key": "k"}, format="json")
    listing = acme_viewer.client.get("/console/tasks/").content.decode()
    assert str(task.pk) in listing and "0.75" in listing
    page = acme_viewer.client.get(f"/console/tasks/{task.pk}/").content.decode()
    assert page.index("&lt;ask&gt;first") < page.index("&lt;ask&gt;second") and str(first.pk) in page and str(second.pk) in page


def test_the_audit_log_shows_who_what_before_and_after(acme, acme_viewer):
    acme.client.put("/api/v1/privacy-policy", {"retention_days": 7}, format="json")
    page = acme_viewer.client.get("/console/audit-log/").content.decode()
    assert "privacy_policy.update" in page and f"key:{acme.key[:12]}" in page
    assert "<dt>retention_days</dt><dd>30</dd>" in page and "<dt>retention_days</dt><dd>7</dd>" in page


def test_the_export_link_is_for_admins_and_works_with_the_session(acme_admin, acme_viewer, acme_interaction):
    assert b"/api/v1/export" not in acme_viewer.client.get("/console/interactions/").content
    assert b"/api/v1/export" in acme_admin.client.get("/console/interactions/").content
    export = acme_admin.client.get("/api/v1/export")
    assert export.status_code == 200 and "attachment" in export["Content-Disposition"]
    assert str(acme_interaction.pk) in b"".join(export.streaming_content).decode()
    assert acme_viewer.client.get("/api/v1/export").status_code == 403


def test_the_owner_deletes_the_organization_by_typing_its_slug(acme, acme_owner):
    wrong = acme_owner.client.post("/console/organization/", {"confirm": "acme-typo"})
    assert b"That is not acme." in wrong.content and Organization.objects.filter(pk=acme.org.pk).exists()
    acme_owner.client.post("/console/organization/", {"confirm": "acme"})
    assert not Organization.objects.filter(pk=acme.org.pk).exists()
    assert acme_owner.client.get("/console/").status_code == 302  # their only organization: they are gone too


def test_an_admin_sees_no_deletion_control(acme_admin):
    page = acme_admin.client.get("/console/organization/").content.decode()
    assert "Delete" not in page
    assert acme_admin.client.post("/console/organization/", {"confirm": "acme"}).status_code == 403


def test_a_page_decrypts_a_bounded_amount_and_withholds_the_rest(acme, acme_viewer, monkeypatch):
    """A hundred of the largest recordings a page would be gigabytes in a web server's memory."""
    from console.views import data

    monkeypatch.setattr(data, "CONTENT_BYTES_SHOWN", 1)
    task = task_create(org=acme.org)
    for number in range(3):
        served(acme.org, text=f"<ask>step {number}</ask>", task=task, feedback=())
    rows = acme_viewer.client.get("/console/interactions/").context["rows"]
    assert [row.shown is not None for row in rows] == [True, False, False] and [row.withheld for row in rows] == [False, True, True]
    monkeypatch.setattr(data, "STEPS_SHOWN", 2)
    page = acme_viewer.client.get(f"/console/tasks/{task.pk}/")
    assert len(page.context["steps"]) == 2 and page.context["step_count"] == 3
    assert "the first 2 below" in page.content.decode() and "open the step to read it" in page.content.decode()
