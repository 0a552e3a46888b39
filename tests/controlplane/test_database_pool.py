"""On PostgreSQL each process takes its connections from a pool (settings: DATABASE_POOL_MAX_SIZE).
A connection its thread never gave back is lost to the pool for good (psycopg_pool counts it as
still out), and once all are lost every request waits and fails: so each way a request can end
must give its connection back."""

import asyncio
import json
import os
import subprocess
import sys

import pytest
from django.db import connection

from controlplane.asgi import application
from tenants.api import admission
from tests.factories import make_tenant

needs_postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="the pool is PostgreSQL's")


def test_a_pool_and_connections_kept_per_thread_are_refused_together(tmp_path):
    env = {**os.environ, "PLATFORM_DATA_DIR": str(tmp_path), "DATABASE_URL": "postgres://u:p@127.0.0.1:1/db", "DATABASE_CONN_MAX_AGE": "60"}
    env.pop("DATABASE_POOL_MAX_SIZE", None)
    refused = subprocess.run([sys.executable, "-c", "import controlplane.settings.base"], env=env, capture_output=True, text=True)
    assert refused.returncode != 0 and "DATABASE_POOL_MAX_SIZE=0" in refused.stderr
    env["DATABASE_POOL_MAX_SIZE"] = "0"
    kept = subprocess.run([sys.executable, "-c", "from controlplane.settings import base; print('pool' in base.DATABASES['default']['OPTIONS'])"],
                          env=env, capture_output=True, text=True)
    assert kept.stdout.strip() == "False", kept.stderr


def _call(key: str, *, path: str, method: str = "GET", body: bytes = b"", disconnect: bool = False) -> int | None:
    """One request through the whole ASGI application: its status, or None when the client
    went away before the answer (`disconnect`: at once, once its body is sent)."""
    sent, asked = [], 0
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"", "headers": headers,
             "http_version": "1.1", "scheme": "http", "server": ("testserver", 80), "client": ("1.2.3.4", 5)}

    async def receive():
        nonlocal asked
        asked += 1
        if asked == 1:
            return {"type": "http.request", "body": body, "more_body": False}
        if disconnect:
            return {"type": "http.disconnect"}
        await asyncio.Event().wait()

    async def send(message):
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    return sent[0]["status"] if sent else None


@needs_postgresql
@pytest.mark.django_db(transaction=True)
def test_every_way_a_request_ends_gives_its_connection_back():
    acme = make_tenant("Acme")
    admission._recent.clear()
    pool = connection.pool
    assert pool is not None and pool.max_size >= 4
    recording = json.dumps({"messages": [{"role": "user", "content": "Task: add two numbers."}], "completion": "<ask>Which file?</ask>"}).encode()
    ends = [
        dict(path="/api/v1/interactions", method="POST", body=recording),  # 201
        dict(path="/api/v1/interactions"),  # 200, a page
        dict(path="/api/v1/interactions/00000000-0000-0000-0000-000000000000"),  # 404
        dict(path="/api/v1/interactions", method="POST", body=b"{not json"),  # 400
        dict(path="/api/v1/interactions", method="POST", body=recording, disconnect=True),  # the client gone mid-request
        dict(path="/api/v1/export", disconnect=True),  # gone while the answer streams
    ]
    out_before = _out(pool)
    statuses = [_call(acme.key, **end) for end in ends * pool.max_size]  # each kind of end more times than the pool has connections
    assert {201, 200, 404, 400} <= set(statuses)
    assert _out(pool) <= out_before


def _out(pool) -> int:
    stats = pool.get_stats()
    return stats["pool_size"] - stats["pool_available"]
