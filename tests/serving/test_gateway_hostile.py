"""What a hostile or careless client costs at the gateway: keys that are not keys, requests that
fail upstream, streams and bodies dropped half way. The model server is a stand-in that answers
at once (the gateway's own work is what is under test); the gateway runs under uvicorn with the
real database."""

import asyncio
import concurrent.futures
import json
import logging
import socket
import time
from datetime import timedelta
from contextlib import asynccontextmanager
from urllib.parse import urlparse

import httpx
import pytest

from serving.gateway import upstream, views
from serving.gateway.protocol import UpstreamUnavailable
from serving.models import TrafficLimits
from tenants import key_hashes
from tenants.models import ApiKey, Interaction, Role
from tenants.organizations import api_key_create

BODY = {"model": "default", "messages": [{"role": "user", "content": "hi"}]}
PROMPT_IDS = [1, 2, 3]


def _chunk(**fields) -> dict:
    return {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "demo-base", **fields}


class StandIn:
    """vLLM's answers (with token ids and logprobs, as the gateway asks for them), or a failure."""

    def __init__(self):
        self.failure: Exception | None = None  # after the model server took the request
        self.unreached: Exception | None = None  # before any took it
        self.delay_s = 0.0
        self.calls = 0

    def payload(self) -> dict:
        return {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "demo-base", "prompt_token_ids": PROMPT_IDS,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "token_ids": [7, 8],
                             "logprobs": {"content": [{"token": "h", "logprob": -0.1, "bytes": None, "top_logprobs": []}] * 2},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}

    def lines(self) -> list[str]:
        chunks = [_chunk(prompt_token_ids=PROMPT_IDS, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
        chunks += [_chunk(choices=[{"index": 0, "delta": {"content": f"t{i} "}, "token_ids": [100 + i],
                                    "logprobs": {"content": [{"token": f"t{i} ", "logprob": -0.5, "bytes": None, "top_logprobs": []}]}}])
                   for i in range(50)]
        return [f"data: {json.dumps(chunk)}" for chunk in chunks] + ["data: [DONE]"]


@pytest.fixture
def stand_in(monkeypatch) -> StandIn:
    model = StandIn()

    class Completion:
        async def payload(self):
            await asyncio.sleep(model.delay_s)
            if model.failure:
                raise model.failure
            return model.payload()

        async def lines(self):
            for line in model.lines():
                await asyncio.sleep(model.delay_s)
                yield line

    @asynccontextmanager
    async def completion(body, target):
        model.calls += 1
        if model.unreached:
            raise model.unreached
        yield Completion()

    monkeypatch.setattr(upstream, "completion", completion)
    return model


@pytest.fixture
def gateway(gateway_server, settings, transactional_db, stand_in) -> str:
    settings.SERVING_BASE_MODEL_NAME = "demo-base"
    views.limiter.cache_clear()
    for cache in (views._principals, views._limits, views._over_quota):
        cache._entries.clear()
    views.key_hashes.cache_clear()
    yield gateway_server
    views.limiter.cache_clear()


def post(gateway: str, key: str, body: dict = BODY, **kwargs) -> httpx.Response:
    return httpx.post(f"{gateway}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30, **kwargs)


def counted(monkeypatch, module, name: str) -> list[str]:
    """The names of the functions run through `module.name`, a hop to a database thread."""
    calls, hop = [], getattr(module, name)

    async def counting(function, *args):
        calls.append(getattr(function, "__name__", "lambda"))
        return await hop(function, *args)

    monkeypatch.setattr(module, name, counting)
    return calls


def made_up(key: str) -> str:
    """A key of the right shape that no one made."""
    return key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")


def test_keys_that_are_not_keys_are_refused_on_the_event_loop(gateway, acme, monkeypatch):
    """Anyone can send a key: the shared database threads also write every organization's
    recordings, and a flood of unknown keys on them delayed everyone's completions."""
    assert post(gateway, acme.key).status_code == 200  # the hashes of the keys there are, read once
    shared, reads = counted(monkeypatch, views, "in_db_thread"), counted(monkeypatch, views.key_hashes(), "on_thread")
    for key in ("not-even-a-key", "osk_short", acme.key + "x", "osk_" + "!" * 43):
        assert post(gateway, key).status_code == 401
    assert shared == reads == []  # told by their shape
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda number: post(gateway, made_up(acme.key)[:-2] + f"{number:02d}").status_code, range(48)))
    assert statuses == [401] * 48 and shared == []
    # misses at the same time share a read of the newest keys, at most one each NEWEST_EVERY_S
    assert len(reads) <= (time.monotonic() - started) / key_hashes.NEWEST_EVERY_S + 2


def test_a_key_made_a_moment_ago_works_at_once_and_a_revoked_one_stops(gateway, acme, monkeypatch):
    assert post(gateway, acme.key).status_code == 200
    _, fresh = api_key_create(org=acme.org, name="fresh", role=Role.VIEWER, actor="test")
    assert post(gateway, fresh).status_code == 200  # made after the hashes were read: the next read has it
    acme.client.delete(f"/api/v1/api-keys/{ApiKey.objects.for_org(acme.org).get(name='fresh').pk}")
    views._principals.forget(fresh)  # its second in the cache is over
    assert post(gateway, fresh).status_code == 401
    shared = counted(monkeypatch, views, "in_db_thread")
    assert post(gateway, fresh).status_code == 401 and shared == []  # dropped from the hashes: no more lookups


def test_a_key_made_between_two_reads_is_found_however_long_after_it_is_first_used(gateway, acme, monkeypatch):
    """Each read takes every key made since the read before: one made after the full read and
    first used minutes later was refused until the next full read."""
    monkeypatch.setattr(key_hashes, "COMMIT_LAG", timedelta(0))  # so that the test need not wait a minute
    assert post(gateway, acme.key).status_code == 200  # the full read
    _, later = api_key_create(org=acme.org, name="later", role=Role.VIEWER, actor="test")
    time.sleep(0.2)
    assert post(gateway, made_up(acme.key)).status_code == 401  # a read of the newest, after `later` was made
    time.sleep(0.2)
    assert post(gateway, later).status_code == 200


def test_a_request_that_fails_upstream_is_charged_what_its_prompt_costs(gateway, acme, stand_in):
    """A read timeout after minutes of generation, a prompt too long for the model: charged
    nothing, such requests could be sent again and again at no cost to the quota."""
    TrafficLimits.objects.create(org=acme.org, tokens_per_minute=10_000)
    stand_in.failure = UpstreamUnavailable("The model did not answer within 120 s.")
    big = {**BODY, "messages": [{"role": "user", "content": "x" * 100_000}]}  # about 25,000 tokens
    assert post(gateway, acme.key, big).status_code == 503
    assert post(gateway, acme.key).status_code == 429  # in debt for what the failed prompt would have cost
    assert stand_in.calls == 1


def test_a_request_no_model_server_took_costs_nothing(gateway, acme, stand_in):
    """No replica ready, one failing: the platform's failure, not the organization's spending."""
    TrafficLimits.objects.create(org=acme.org, tokens_per_minute=10_000)
    stand_in.unreached = UpstreamUnavailable("No vLLM replica is ready right now; retry shortly.")
    big = {**BODY, "messages": [{"role": "user", "content": "x" * 100_000}]}
    assert [post(gateway, acme.key, big).status_code for _ in range(3)] == [503] * 3
    stand_in.unreached = None
    assert post(gateway, acme.key).status_code == 200


def test_a_stream_its_client_dropped_is_recorded_with_its_prompts_tokens(gateway, acme, stand_in):
    stand_in.delay_s = 0.02
    with httpx.stream("POST", f"{gateway}/v1/chat/completions", json={**BODY, "stream": True},
                      headers={"Authorization": f"Bearer {acme.key}"}, timeout=30) as response:
        first = next(json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: "))
    deadline = time.monotonic() + 10
    while (row := Interaction.objects.for_org(acme.org).filter(pk=first["id"]).first()) is None:
        assert time.monotonic() < deadline, "the dropped stream was not recorded"
        time.sleep(0.05)
    assert row.interrupted and row.prompt_tokens == len(PROMPT_IDS)  # usage comes last: the ids came first
    assert row.completion_tokens < 50  # what was generated before it went


def test_a_client_gone_mid_body_is_no_server_error(gateway, acme, caplog):
    """Nobody reads the answer, and a traceback per dropped body would let any key fill the log."""
    address = urlparse(gateway)
    with socket.create_connection((address.hostname, address.port)) as connection:
        connection.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + acme.key.encode()
                           + b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
        time.sleep(0.3)
    time.sleep(0.5)
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert post(gateway, acme.key).status_code == 200  # its slot was given back


def test_a_large_body_is_parsed_off_the_database_threads(gateway, acme, monkeypatch):
    """Parsing 4 MB holds a thread for a tenth of a second: on the database threads, one
    organization's large bodies held up everyone's recordings."""
    on_database_threads, hop = [], views.in_db_thread

    async def counted(function, *args):
        on_database_threads.append(function.__name__)
        return await hop(function, *args)

    monkeypatch.setattr(views, "in_db_thread", counted)
    large = {**BODY, "messages": [{"role": "user", "content": "x" * (2 * views.PARSE_ON_LOOP_BYTES)}]}
    assert post(gateway, acme.key, large).status_code == 200
    assert "_parsed" not in on_database_threads


def test_a_task_of_another_organization_is_404_named_where_it_was_given(gateway, acme, globex):
    from tenants.recording import task_create

    theirs = str(task_create(org=globex.org).pk)
    in_body = post(gateway, acme.key, {**BODY, "metadata": {"task_id": theirs}})
    assert in_body.status_code == 404 and in_body.json()["error"]["param"] == "metadata"
    by_header = httpx.post(f"{gateway}/v1/chat/completions", json=BODY, timeout=30,
                           headers={"Authorization": f"Bearer {acme.key}", "X-Task-Id": theirs})
    assert by_header.status_code == 404 and by_header.json()["error"]["param"] is None
    assert not Interaction.objects.for_org(globex.org).exists() and not Interaction.objects.for_org(acme.org).exists()
