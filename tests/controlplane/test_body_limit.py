"""A body past the size limit costs the server almost nothing: refused by its declared length
before a byte is read, or cut off as soon as it passes the limit, before authentication and
before Django spools it to a temporary file."""

import asyncio
import json

import pytest
from django.conf import settings

from controlplane.asgi import application
from controlplane.body_limit import body_limited
from tenants.api import admission
from tenants.models import Role
from tenants.organizations import api_key_create
from tests.factories import make_tenant

LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def call(path: str, *, declared: int | None, chunks: int, chunk_size: int = 1024 * 1024, key: str | None = None) -> tuple[list[dict], int]:
    """The messages the server sent, and how many chunks of the body it asked for."""
    asked, sent = 0, []
    headers = [(b"content-type", b"application/json")] + ([(b"content-length", str(declared).encode())] if declared else [])
    headers += [(b"authorization", f"Bearer {key}".encode())] if key else []
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": headers, "http_version": "1.1", "scheme": "http", "server": ("testserver", 80), "client": ("1.2.3.4", 5)}

    async def receive():
        nonlocal asked
        if asked == chunks:  # the whole body sent: the client waits for the answer
            await asyncio.Event().wait()
        asked += 1
        return {"type": "http.request", "body": b" " * chunk_size, "more_body": asked < chunks}

    async def send(message):
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    return sent, asked


@pytest.mark.parametrize("path", ["/api/v1/feedback", "/v1/chat/completions"])
def test_a_declared_length_past_the_limit_is_refused_before_a_byte_is_read(path):
    sent, asked = call(path, declared=100 * LIMIT, chunks=100)
    assert asked == 0 and sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["error"]["code"] == "request_too_large"


@pytest.mark.parametrize(("path", "status"), [
    ("/api/v1/feedback", 413),
    ("/v1/chat/completions", 401),  # the gateway checks the key before it reads a byte
])
def test_an_undeclared_length_is_cut_off_once_it_passes_the_limit(path, status):
    chunk = 1024 * 1024
    sent, asked = call(path, declared=None, chunks=1000, chunk_size=chunk)  # a gigabyte, chunked, with no key
    assert asked <= LIMIT // chunk + 2 and sent[0]["status"] == status
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]  # one answer, nothing after it


@pytest.mark.django_db(transaction=True)  # the key is looked up on another thread, before Django runs
def test_an_adapter_upload_has_a_limit_of_its_own_for_an_admins_key_alone():
    upload_limit = settings.SERVING_ADAPTER_UPLOAD_MAX_BYTES
    assert upload_limit > LIMIT
    acme = make_tenant("Acme")
    _, admin_key = api_key_create(org=acme.org, name="ci", role=Role.ADMIN, actor="test")
    _, viewer_key = api_key_create(org=acme.org, name="dashboards", role=Role.VIEWER, actor="test")

    sent, asked = call("/api/v1/adapters", declared=upload_limit + 1, chunks=1, key=admin_key)
    assert asked == 0 and sent[0]["status"] == 413
    assert str(upload_limit) in json.loads(sent[1]["body"])["error"]["message"]
    sent, asked = call("/api/v1/adapters", declared=2 * LIMIT, chunks=2, chunk_size=LIMIT, key=admin_key)
    assert asked == 2 and sent[0]["status"] == 415  # past the length check: read whole, and the view answered (not multipart)

    # Anyone else's upload is held to the ordinary limit, unread: no key, a made-up one, a viewer's.
    for key in (None, "osk_" + "x" * 43, viewer_key, acme.key.replace(acme.key[-4:], "AAAA")):
        sent, asked = call("/api/v1/adapters", declared=2 * LIMIT, chunks=2, chunk_size=LIMIT, key=key)
        assert asked == 0 and sent[0]["status"] == 413, key
        assert str(LIMIT) in json.loads(sent[1]["body"])["error"]["message"]


@pytest.mark.django_db(transaction=True)
def test_a_made_up_key_s_upload_is_refused_without_a_lookup(monkeypatch):
    acme = make_tenant("Acme")
    lookups, looked_up = [], admission.api_key_authenticate
    monkeypatch.setattr(admission, "api_key_authenticate", lambda raw_key: lookups.append(raw_key) or looked_up(raw_key))
    for number in range(10):
        sent, asked = call("/api/v1/adapters", declared=2 * LIMIT, chunks=2, chunk_size=LIMIT, key=f"osk_{number:043d}")
        assert asked == 0 and sent[0]["status"] == 413
    sent, _ = call("/api/v1/adapters", declared=2 * LIMIT, chunks=2, chunk_size=LIMIT, key=acme.key)
    assert sent[0]["status"] == 415 and lookups[0] == acme.key  # an owner's key: looked up, and let past


@pytest.mark.parametrize(("method", "path", "size", "status"), [
    ("POST", "/big", 100, 200), ("POST", "/big", 101, 413), ("PUT", "/big", 11, 413), ("POST", "/other", 11, 413),
])
def test_larger_limits_hold_for_their_method_and_path_alone(method, path, size, status):
    async def app(scope, receive, send):
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})

    sent = []
    scope = {"type": "http", "method": method, "path": path, "headers": [(b"content-length", str(size).encode())]}

    async def receive():
        return {"type": "http.request", "body": b" " * size, "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(body_limited(app, limit=10, larger={("POST", "/big"): 100})(scope, receive, send))
    assert sent[0]["status"] == status
