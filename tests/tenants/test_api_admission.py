"""The tenant API's per-organization limits under the ASGI server (tenants/api/admission.py): a
key's request past them is refused by its headers, before a byte of its body is read, and is
counted once, not again by DRF's throttle."""

import asyncio
import json
import time

import pytest
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from controlplane.asgi import application
from tenants.api import admission
from tenants.api.admitted import REUSABLE_S, Admitted
from tenants.models import ApiKey, Interaction, Membership, Role
from tenants.organizations import api_key_authenticate, api_key_create, user_for_email
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)  # keys are looked up on another thread, before Django runs

URL = "/api/v1/interactions"
BODY = json.dumps({"messages": [{"role": "user", "content": "x" * 100_000}], "completion": "y"}).encode()  # past what a refusal reads


@pytest.fixture(autouse=True)
def forget_keys():
    admission._recent.clear()
    admission.key_hashes.cache_clear()
    yield
    admission._recent.clear()
    admission.key_hashes.cache_clear()


def call(key: str | None, *, method: str = "POST", body: bytes = BODY, declared: bool | int = True, path: str = URL,
         headers: list[tuple[bytes, bytes]] = ()) -> tuple[int, dict, dict | None, int]:
    """Through the whole ASGI application: the status, the headers and the JSON answer, and how
    many times the application asked for the body. `declared`: the body's length, or another."""
    asked, sent = 0, []
    length = len(body) if declared is True else declared
    headers = [(b"content-type", b"application/json"), *headers] + ([(b"content-length", str(length).encode())] if declared else [])
    headers += [(b"authorization", f"Bearer {key}".encode())] if key else []
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"", "headers": headers,
             "http_version": "1.1", "scheme": "http", "server": ("testserver", 80), "client": ("1.2.3.4", 5)}

    async def receive():
        nonlocal asked
        if asked:  # the whole body sent: the client waits for the answer
            await asyncio.Event().wait()
        asked += 1
        return {"type": "http.request", "body": body if method == "POST" else b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    answer = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], dict(sent[0]["headers"]), json.loads(answer) if answer else None, asked


def test_past_its_bytes_a_minute_a_body_is_refused_unread_and_the_others_are_not(settings):
    acme, globex = make_tenant("Acme"), make_tenant("Globex")
    settings.TENANT_API_BYTES_PER_MINUTE = 2 * len(BODY) + 100
    assert [call(acme.key)[0] for _ in range(2)] == [201, 201]
    status, headers, answer, asked = call(acme.key)
    assert (status, asked) == (429, 0)  # told by its declared length: not a byte read
    assert answer["error"]["code"] == "throttled" and "upload limit" in answer["error"]["message"]
    assert 1 <= int(headers[b"retry-after"]) <= 60 and headers[b"connection"] == b"close"
    assert Interaction.objects.for_org(acme.org).count() == 2
    assert call(globex.key)[0] == 201


def test_a_request_admitted_before_its_body_is_counted_once(settings):
    acme = make_tenant("Acme")
    settings.TENANT_API_REQUESTS_PER_MINUTE = 3
    assert [call(acme.key, method="GET")[0] for _ in range(4)] == [200, 200, 200, 429]  # counted twice: 200 and then 429s


def test_a_body_of_no_declared_length_still_counts_its_bytes(settings):
    acme = make_tenant("Acme")
    settings.TENANT_API_BYTES_PER_MINUTE = 2 * len(BODY) + 100
    statuses = [call(acme.key, declared=False)[0] for _ in range(3)]  # read, then counted by DRF's throttle
    assert 429 not in statuses[:2] and statuses[2] == 429


def test_a_key_revoked_a_moment_ago_is_refused_although_admission_remembers_it():
    acme = make_tenant("Acme")
    api_key, raw_key = api_key_create(org=acme.org, name="ci", role=Role.ADMIN, actor="test")
    assert call(raw_key, method="GET")[0] == 200
    ApiKey.objects.for_org(acme.org).filter(pk=api_key.pk).update(revoked_at=timezone.now())
    assert raw_key in admission._recent  # counted as its organization's for a second more...
    status, _, answer, _ = call(raw_key, method="GET")  # ...and never let in
    assert status == 401 and "revoked" in answer["error"]["message"]


def test_a_made_up_key_is_answered_401():
    make_tenant("Acme")
    status, _, answer, _ = call("osk_" + "x" * 43, method="GET")
    assert status == 401 and answer["error"]["code"] == "authentication_failed"


def test_made_up_keys_are_refused_without_a_lookup_and_a_key_made_a_moment_ago_works(monkeypatch):
    """Anyone can send a key: a flood of made-up ones cost the database a lookup each, where a web
    server's other organizations' requests wait. (DRF's authentication reuses what admission
    found for the request, unless that was over a second before.)"""
    acme = make_tenant("Acme")
    assert call(acme.key, method="GET")[0] == 200  # the hashes of the keys there are, read once
    lookups, looked_up = [], admission.api_key_authenticate
    monkeypatch.setattr(admission, "api_key_authenticate", lambda raw_key: lookups.append(raw_key) or looked_up(raw_key))
    for number in range(20):
        status, _, answer, _ = call(f"osk_{number:043d}", method="GET")
        assert status == 401 and answer["error"]["code"] == "authentication_failed"
    assert lookups == []
    _, fresh = api_key_create(org=acme.org, name="fresh", role=Role.VIEWER, actor="test")
    assert call(fresh, method="GET")[0] == 200 and lookups == [fresh]  # the next read of the newest has it


def test_a_small_refused_body_is_read_so_that_its_client_reads_the_429(settings):
    """A client reads no answer before it has sent its body: a closed connection would read as a
    network error, not as a limit with its Retry-After."""
    acme = make_tenant("Acme")
    settings.TENANT_API_REQUESTS_PER_MINUTE = 1
    small = json.dumps({"messages": [{"role": "user", "content": "x"}], "completion": "y"}).encode()
    assert call(acme.key, body=small)[0] == 201
    status, headers, _, asked = call(acme.key, body=small)
    assert (status, asked) == (429, 1) and b"connection" not in headers


def test_with_the_database_unreachable_for_the_lookup_the_request_goes_on_to_the_api(monkeypatch):
    """Not a 500 from the ASGI layer: the API answers it as before (here its own lookup works)."""
    acme = make_tenant("Acme")

    def unreachable(raw_key):
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(admission, "api_key_authenticate", unreachable)
    assert call(acme.key, method="GET")[0] == 200


def test_a_second_authorization_header_does_not_skip_the_count(settings):
    """Django joins repeated headers with commas, so DRF would read another header than admission
    did: here a console session's request with a made-up key beside a Basic header, which
    admission saw as a key of nobody's and DRF as no key at all. Such a request is not judged
    there, and the API counts it as before."""
    acme = make_tenant("Acme")
    user = user_for_email("viewer@acme.example")
    Membership.objects.create(org=acme.org, user=user, role=Role.VIEWER, joined_at=timezone.now())
    browser = Client()
    browser.force_login(user)
    cookie = [(b"cookie", f"sessionid={browser.cookies['sessionid'].value}".encode()), (b"authorization", b"Basic eDp4")]
    settings.TENANT_API_REQUESTS_PER_MINUTE = 2
    statuses = [call("osk_" + "x" * 43, method="GET", headers=cookie)[0] for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_a_length_beside_a_transfer_encoding_is_not_believed(settings):
    """The encoding frames the body: a body declared 1 byte and sent chunked is counted as read."""
    acme = make_tenant("Acme")
    settings.TENANT_API_BYTES_PER_MINUTE = 2 * len(BODY) + 100
    chunked = [(b"transfer-encoding", b"chunked")]
    statuses = [call(acme.key, declared=1, headers=chunked)[0] for _ in range(3)]
    assert 429 not in statuses[:2] and statuses[2] == 429


def test_an_adapter_upload_is_not_held_to_the_bytes_a_minute(settings):
    """It has a limit of its own, an admin's alone: held to 16 MiB a minute, no archive past it could be uploaded."""
    acme = make_tenant("Acme")
    settings.TENANT_API_BYTES_PER_MINUTE = 1000
    statuses = [call(acme.key, path="/api/v1/adapters")[0] for _ in range(2)]  # JSON, not a multipart archive
    assert statuses == [415, 415]
    assert call(acme.key)[0] == 429  # everything else is


def test_the_remembered_keys_are_bounded(monkeypatch):
    monkeypatch.setattr(admission, "RECENT_MAX", 3)
    acme = make_tenant("Acme")
    keys = [api_key_create(org=acme.org, name=f"k{i}", role=Role.ADMIN, actor="test")[1] for i in range(5)]
    for key in keys:
        assert call(key, method="GET")[0] == 200
    assert len(admission._recent) <= 3 and keys[-1] in admission._recent


def test_authentication_reuses_a_lookup_only_a_moment_old():
    """A long upload's key may have been revoked while its body came: looked up again."""
    acme = make_tenant("Acme")
    principal = api_key_authenticate(acme.key)
    now = time.monotonic()
    assert Admitted(acme.key, principal, looked_up_at=now, bytes_counted=True).principal_for(acme.key) == principal
    assert Admitted(acme.key, principal, looked_up_at=now - 2 * REUSABLE_S, bytes_counted=True).principal_for(acme.key) is False
    assert Admitted(acme.key, principal, looked_up_at=None, bytes_counted=True).principal_for(acme.key) is False  # remembered
    assert Admitted(acme.key, principal, looked_up_at=now, bytes_counted=True).principal_for(acme.key + "x") is False
