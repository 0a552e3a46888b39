"""The tenant API's per-organization limits, applied before a request's body is read.

Django's ASGI handler reads a request's whole body (spooling it to a temporary file past a few
megabytes) before DRF's authentication and throttles see it: an organization past its limits
still made the web server read 1 MB recordings as fast as it sent them, each answered 429 only
once read, and a flood of them took the server's core (docs/figures.md, "noisy neighbour"). So
for a request to /api/v1/ with a bearer key, this looks the key up and counts the request and
its declared length against the organization's windows (tenants.api.windows) from the headers
alone. Past a limit it answers 429: a small body is read and dropped first, so that its client
reads the answer; a larger one is left unread and its connection closed.

A key's lookup is remembered for a second, so that a burst costs the database one query, not
one a request; a key whose hash is not among the keys there are (tenants.key_hashes) is no key,
told without a query, so that a flood of made-up keys costs set lookups. What was found rides
in the ASGI scope (tenants.api.admitted): DRF's throttle counts only what was not counted here
(a body of no declared length), and DRF's authentication takes the key's principal from there
when it was looked up for this very request, else looks it up itself, as before: a key revoked
a moment ago may still be counted here, never let in there. A request this cannot judge (no key of a key's shape, the database unreachable) goes on
as it came, and the API answers it as before.
"""

import functools
import json
import time
from collections.abc import Callable
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, connection
from rest_framework.exceptions import Throttled

from tenants.api.admitted import SCOPE_KEY, Admitted
from tenants.api.windows import api_admit
from tenants.key_hashes import KeyHashes
from tenants.organizations import Principal, api_key_authenticate, bearer_key

T = TypeVar("T")

PREFIX = "/api/v1/"
RECENT_S = 1.0
RECENT_MAX = 10_000  # keys remembered at most, in a web process
# A refused body this small is read, and dropped, so that its client reads the 429: an ordinary
# recording or feedback batch. Past it, reading what a flood sends costs the core that refusing
# was to save (a flood of 1 MB recordings: docs/figures.md, "noisy neighbour").
DRAIN_BYTES = 64 * 1024
_recent: dict[str, tuple[float, Principal]] = {}  # raw key -> (until, its principal); live keys only


def admitted_first(app, *, uncounted_bodies: frozenset[tuple[str, str]] = frozenset()):
    """The ASGI application `app` behind the tenant API's limits (module docstring). The bodies
    of `uncounted_bodies` (method, path) are not held to the bytes window: an adapter upload has
    a limit of its own."""
    async def application(scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            return await app(scope, receive, send)
        raw_key = bearer_key(authorization(scope))
        if raw_key is None:
            return await app(scope, receive, send)
        size = declared_length(scope)
        if (scope["method"], scope["path"]) in uncounted_bodies:
            size = 0
        try:
            admitted, refusal = await _admitted(raw_key, size)
        except (OperationalError, InterfaceError):  # the API answers 503 for it
            return await app(scope, receive, send)
        if refusal is not None:
            return await _refuse(receive, send, refusal, declared=size)
        await app({**scope, SCOPE_KEY: admitted}, receive, send)

    return application


async def _admitted(raw_key: str, size: int | None) -> tuple[Admitted, Throttled | None]:
    recent = _recent.get(raw_key)
    fresh = recent is None or recent[0] < time.monotonic()
    principal = (await key_principal(raw_key)) if fresh else recent[1]
    looked_up_at = time.monotonic() if fresh else None  # misses are never remembered: always fresh
    if principal is None:
        return Admitted(raw_key, None, looked_up_at=looked_up_at, bytes_counted=False), None
    if fresh:
        _remember(raw_key, principal)
    # Off the views' thread: a count is a cache's (or Redis's) round trip, and no database's.
    refusal = await sync_to_async(api_admit, thread_sensitive=False)(principal.org.pk, body_bytes=size or 0)
    return Admitted(raw_key, principal, looked_up_at=looked_up_at, bytes_counted=size is not None), refusal


def authorization(scope) -> str:
    """The request's one Authorization header; none when it has several, which the layers after
    this one could read otherwise (Django joins them with commas)."""
    values = [value for name, value in scope.get("headers") or [] if name == b"authorization"]
    return values[0].decode("latin-1") if len(values) == 1 else ""


def declared_length(scope) -> int | None:
    """The body's length as declared, or None when it is not to be believed: absent, not a number,
    or beside a Transfer-Encoding, which frames the body instead."""
    headers = [(name, value) for name, value in scope.get("headers") or [] if name in (b"content-length", b"transfer-encoding")]
    if [name for name, _ in headers] != [b"content-length"] or not headers[0][1].isdigit():
        return None
    return int(headers[0][1])


def _remember(raw_key: str, principal: Principal) -> None:
    now = time.monotonic()
    if len(_recent) >= RECENT_MAX:  # keys revoked, expired or long unused: dropped, not kept forever
        for key in [key for key, (until, _) in _recent.items() if until < now]:
            del _recent[key]
        if len(_recent) >= RECENT_MAX:
            _recent.clear()
    _recent[raw_key] = (now + RECENT_S, principal)


@functools.cache
def key_hashes() -> KeyHashes:
    return KeyHashes(on_thread=_on_pool_thread)


async def key_principal(raw_key: str) -> Principal | None:
    """The principal of a bearer key, from an ASGI layer: a set lookup for a made-up key, else one
    indexed query on a pool thread."""
    return await key_hashes().principal_of(raw_key, lambda key: _on_pool_thread(lambda: api_key_authenticate(key)))


async def _on_pool_thread(read: Callable[[], T]) -> T:
    """On a pool thread: lookups of different keys in parallel, none behind a queue of others'."""
    def closing() -> T:
        try:
            return read()
        finally:  # a pool thread's connection, which no request closes
            connection.close()

    return await sync_to_async(closing, thread_sensitive=False)()


async def _refuse(receive, send, refusal: Throttled, *, declared: int | None) -> None:
    drained = (declared is None or declared <= DRAIN_BYTES) and await _drained(receive, up_to=DRAIN_BYTES)
    # The tenant API's error shape (tenants/api/errors.py, which cannot be imported before DRF's views).
    body = json.dumps({"error": {"code": "throttled", "message": str(refusal.detail)}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"retry-after", str(refusal.wait).encode())]
    await send({"type": "http.response.start", "status": 429, "headers": headers + ([] if drained else [(b"connection", b"close")])})
    await send({"type": "http.response.body", "body": body})


async def _drained(receive, *, up_to: int) -> bool:
    """Whether the body was received whole, and dropped (never kept, parsed or spooled), within
    `up_to` bytes: then the client, which reads no answer before it has sent its body, reads its
    429 and Retry-After. A larger body is left unread and its connection closed after the answer,
    as for a body past the size limit: a client still sending may see a network error instead."""
    received = 0
    while received <= up_to:
        message = await receive()
        if message["type"] != "http.request":
            return False
        received += len(message.get("body", b""))
        if not message.get("more_body"):
            return True
    return False
