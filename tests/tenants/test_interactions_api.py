import json

from tenants.models import AuditEvent, FeedbackEvent, Interaction
from tests.factories import record

URL = "/api/v1/interactions"


def test_recording_an_interaction_returns_its_id_and_stores_it(acme):
    body = {
        "messages": [{"role": "system", "content": "You edit code."}, {"role": "user", "content": "Task: Return the square of a number."}],
        "completion": '<edit file="core.py">\ndef square_number(n):\n    return n * n\n</edit>',
        "adapter": "acme@v1",
        "latency_ms": 87.5,
    }
    response = acme.client.post(URL, body, format="json")
    assert response.status_code == 201
    stored = acme.client.get(f"{URL}/{response.json()['id']}").json()
    assert stored["messages"] == body["messages"] and stored["completion"] == body["completion"]
    assert stored["adapter"] == "acme@v1" and stored["latency_ms"] == 87.5 and stored["source"] == "api"


def test_an_interaction_links_to_its_background_task(acme):
    task_id = acme.client.post("/api/v1/tasks", {}, format="json").json()["id"]
    interaction_id = record(acme.client, task_id=task_id)
    assert acme.client.get(f"{URL}/{interaction_id}").json()["task_id"] == task_id
    assert acme.client.get(f"/api/v1/tasks/{task_id}").json()["interactions"] == 1


def test_a_task_of_another_organization_is_404_and_nothing_is_recorded(acme, globex):
    theirs = globex.client.post("/api/v1/tasks", {}, format="json").json()["id"]
    response = acme.client.post(URL, {"messages": [{"role": "user", "content": "x"}], "completion": "y", "task_id": theirs}, format="json")
    assert response.status_code == 404
    assert Interaction.objects.for_org(acme.org).count() == 0


def test_it_rejects_malformed_interactions_naming_the_field(acme):
    cases = {
        "messages": {"completion": "y"},
        "messages.0.role": {"messages": [{"role": "wizard", "content": "x"}], "completion": "y"},
        "completion": {"messages": [{"role": "user", "content": "x"}], "completion": 5},
        "latency_ms": {"messages": [{"role": "user", "content": "x"}], "completion": "y", "latency_ms": -1},
        "prompt": {"messages": [{"role": "user", "content": "x"}], "completion": "y", "prompt": "z"},
    }
    for field, body in cases.items():
        response = acme.client.post(URL, body, format="json")
        assert response.status_code == 400, field
        assert response.json()["error"]["message"].startswith(field), response.json()
    assert Interaction.objects.for_org(acme.org).count() == 0


def test_a_nul_character_or_lone_surrogate_in_text_is_rejected(acme):
    for bad in ('"x\\u0000y"', '"x\\ud800y"'):
        raw = '{"messages": [{"role": "user", "content": %s}], "completion": "y"}' % bad
        assert acme.client.post(URL, raw, content_type="application/json").status_code == 400
    assert Interaction.objects.for_org(acme.org).count() == 0


def test_the_list_is_newest_first_in_cursor_pages(acme):
    ids = [record(acme.client, text=f"prompt {i}") for i in range(5)]
    first = acme.client.get(URL, {"limit": 2}).json()
    second = acme.client.get(first["next"]).json()
    third = acme.client.get(second["next"]).json()
    seen = [row["id"] for page in (first, second, third) for row in page["results"]]
    assert seen == list(reversed(ids)) and third["next"] is None


def test_erasing_an_interaction_removes_it_with_its_feedback_and_audits_it(acme):
    interaction_id = record(acme.client)
    acme.client.post("/api/v1/feedback", {"events": [{"interaction_id": interaction_id, "type": "edit_accepted", "idempotency_key": "k"}]}, format="json")
    assert acme.client.delete(f"{URL}/{interaction_id}").status_code == 204
    assert acme.client.get(f"{URL}/{interaction_id}").status_code == 404
    assert FeedbackEvent.objects.for_org(acme.org).count() == 0
    assert AuditEvent.objects.for_org(acme.org).filter(action="interaction.erase", target=interaction_id).exists()


def test_a_viewer_records_and_reads_but_cannot_erase(acme, viewer):
    interaction_id = record(viewer)
    assert viewer.get(f"{URL}/{interaction_id}").status_code == 200
    assert viewer.delete(f"{URL}/{interaction_id}").status_code == 403


def test_an_unknown_id_is_a_json_404(acme):
    response = acme.client.get(f"{URL}/not-a-uuid")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_list_filters_by_task_and_adapter(acme):
    task_id = acme.client.post("/api/v1/tasks", {}, format="json").json()["id"]
    in_task = record(acme.client, task_id=task_id, adapter="acme@v2")
    record(acme.client, adapter="acme@v1")
    assert [row["id"] for row in acme.client.get(URL, {"task_id": task_id}).json()["results"]] == [in_task]
    assert [row["id"] for row in acme.client.get(URL, {"adapter": "acme@v2"}).json()["results"]] == [in_task]
    assert acme.client.get(URL, {"task_id": "nope"}).status_code == 400


def test_it_records_openai_style_messages_with_tool_calls_and_text_parts(acme):
    token = "ghp_" + "a1B2" * 9
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "You edit code."}]},
        {"role": "user", "content": "Fix utils.py", "name": "dana"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "utils.py", "token": "{token}"}}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "def f(): pass"},
    ]
    response = acme.client.post(URL, {"messages": messages, "completion": "done"}, format="json")
    assert response.status_code == 201, response.json()
    stored = acme.client.get(f"{URL}/{response.json()['id']}").json()
    assert stored["messages"][0]["content"] == [{"type": "text", "text": "You edit code."}]
    assert stored["messages"][2]["content"] is None and stored["messages"][3]["tool_call_id"] == "call_1"
    assert token not in json.dumps(stored) and stored["redactions"] == 1


def test_message_content_must_be_text(acme):
    for content in ({"text": "x"}, [{"type": "image_url", "image_url": "x"}], 5):
        body = {"messages": [{"role": "user", "content": content}], "completion": "y"}
        response = acme.client.post(URL, body, format="json")
        assert response.status_code == 400 and response.json()["error"]["message"].startswith("messages.0.content")


def test_a_page_holds_a_bounded_number_of_bytes_and_its_cursors_go_on_from_where_it_ended(acme, monkeypatch):
    """?limit=1000 of large interactions would be gigabytes in memory: a page ends early instead."""
    from tenants.api.views import InteractionPage

    ids = [record(acme.client, text=f"{i} " + "x" * 3000) for i in range(5)]
    record(acme.client, text="huge " + "y" * 20000)
    monkeypatch.setattr(InteractionPage, "max_bytes", 7000)
    seen, pages, url = [], [], f"{URL}?limit=1000"
    while url:
        page = acme.client.get(url).json()
        pages.append(page)
        seen += [row["id"] for row in page["results"]]
        assert all(row["messages"] for row in page["results"])
        url = page["next"]
    assert sorted(seen) == sorted(ids + [seen[0]]) and len(seen) == 6  # every row once, the huge one alone
    assert [len(page["results"]) for page in pages] == [1, 2, 2, 1]
    back = acme.client.get(pages[2]["previous"]).json()  # back from the third page: the second, bounded from its end
    assert [row["id"] for row in back["results"]] == [row["id"] for row in pages[1]["results"]]
