"""The OpenAI-compatible gateway, used through the official `openai` client against a real
vLLM server and the real database."""

import asyncio
import itertools
import json
import time

import httpx
import openai
import pytest
from tokenizers import Tokenizer

from serving.gateway.server_timing import server_timing_parse
from serving.models import TrafficLimits
from tenants.models import Interaction
from tenants.privacy import policy_update
from tenants.recording import interaction_content, task_create
from tests.serving.gateway_calls import PROMPT, ask, gateway_client, stored
from tests.serving.vllm_server import BASE_NAME, deployed_adapter

pytestmark = pytest.mark.vllm


def test_the_openai_client_gets_a_recorded_completion_with_matching_logprobs(gateway, acme, vllm):
    completion = ask(gateway_client(gateway, acme.key), temperature=1.0, user="dev-1")
    assert completion.model == BASE_NAME and completion.choices[0].message.content
    assert completion.choices[0].logprobs is None  # not asked for

    row = stored(acme.org, completion.id)
    assert (row.source, row.adapter, interaction_content(interaction=row)["end_user"]) == ("gateway", None, "dev-1")
    assert row.completion_tokens == completion.usage.completion_tokens and row.latency_ms > 0
    content = interaction_content(interaction=row)
    assert content["completion"] == completion.choices[0].message.content
    tokens = content["tokens"]
    assert len(tokens["completion_ids"]) == len(tokens["logprobs"]) == completion.usage.completion_tokens
    assert all(logprob <= 0 for logprob in tokens["logprobs"])
    tokenizer = Tokenizer.from_file(str(vllm.base_dir / "tokenizer.json"))
    # vLLM holds back the bytes of a character cut off by max_tokens; the ids keep them.
    assert tokenizer.decode(tokens["completion_ids"]).rstrip("\ufffd") == content["completion"].rstrip("\ufffd")
    assert len(tokens["prompt_ids"]) == completion.usage.prompt_tokens


def test_logprobs_reach_the_client_only_when_asked(gateway, acme):
    completion = ask(gateway_client(gateway, acme.key), logprobs=True, top_logprobs=2)
    entries = completion.choices[0].logprobs.content
    assert len(entries) == completion.usage.completion_tokens
    assert all(len(entry.top_logprobs) == 2 for entry in entries)


def test_a_stream_relays_the_completion_and_records_it_under_the_streams_id(gateway, acme):
    stream = ask(gateway_client(gateway, acme.key), stream=True, temperature=1.0)
    chunks = list(stream)
    assert {chunk.id for chunk in chunks} == {chunks[0].id}
    assert {chunk.model for chunk in chunks} == {BASE_NAME}
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert all(chunk.usage is None for chunk in chunks)  # not asked for
    content = interaction_content(interaction=stored(acme.org, chunks[0].id))
    assert content["completion"] == text
    assert len(content["tokens"]["completion_ids"]) == len(content["tokens"]["logprobs"]) > 0


def test_a_stream_reports_usage_when_asked(gateway, acme):
    chunks = list(ask(gateway_client(gateway, acme.key), stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == stored(acme.org, chunks[0].id).completion_tokens


def test_each_organization_is_served_its_own_adapter(gateway, acme, globex, vllm):
    mine, theirs = deployed_adapter(vllm, acme.org, seed=1), deployed_adapter(vllm, globex.org, seed=2)
    outputs = {}
    for tenant, adapter in ((acme, mine), (globex, theirs)):
        completion = ask(gateway_client(gateway, tenant.key), temperature=0)
        assert completion.model == adapter.name
        assert stored(tenant.org, completion.id).adapter == adapter.name
        outputs[adapter.name] = completion.choices[0].message.content
    outputs["base"] = ask(gateway_client(gateway, acme.key), model="acme@v1", temperature=0).choices[0].message.content
    assert outputs["base"] == outputs["acme@v1"]  # naming its own deployed version is the same as "default"
    assert outputs["acme@v1"] != outputs["globex@v1"]


@pytest.mark.parametrize("model", ["globex@v1", "demo-base", "../../globex/v1", "/etc/passwd", "acme@v2"])
def test_an_organization_cannot_reach_another_model_than_its_own(gateway, acme, globex, vllm, model):
    deployed_adapter(vllm, globex.org, seed=2)
    with pytest.raises(openai.NotFoundError) as raised:
        ask(gateway_client(gateway, acme.key), model=model)
    assert raised.value.body["code"] == "model_not_found"
    assert not Interaction.objects.for_org(acme.org).exists()


def test_zero_retention_stores_metrics_and_no_text(gateway, acme):
    policy_update(org=acme.org, changes={"store_content": False, "training_enabled": False}, actor="test")
    completion = ask(gateway_client(gateway, acme.key))
    row = stored(acme.org, completion.id)
    assert row.content is None and row.completion_tokens == completion.usage.completion_tokens


def test_a_call_joins_its_background_task_by_metadata_or_header(gateway, acme, globex):
    task = task_create(org=acme.org)
    by_metadata = ask(gateway_client(gateway, acme.key), metadata={"task_id": str(task.pk)})
    by_header = ask(gateway_client(gateway, acme.key, default_headers={"X-Task-Id": str(task.pk)}))
    assert stored(acme.org, by_metadata.id).task_id == stored(acme.org, by_header.id).task_id == task.pk
    with pytest.raises(openai.NotFoundError):
        ask(gateway_client(gateway, globex.key), metadata={"task_id": str(task.pk)})


def post(gateway: str, key: str | None, body) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(f"{gateway}/v1/chat/completions", content=body if isinstance(body, bytes) else json.dumps(body), headers=headers, timeout=60)


@pytest.mark.parametrize("stream", [False, True])
def test_a_completion_says_where_its_time_went(gateway, acme, stream):
    body = {"model": "default", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8, "stream": stream}
    started = time.perf_counter()
    response = post(gateway, acme.key, body)
    latency_ms = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, response.text
    phases = server_timing_parse(response.headers["Server-Timing"])
    # A stream's headers go before its chunks: they time the wait up to vLLM's answer, not the rest.
    assert list(phases) == ["admit", "parse", "turn", "model", *([] if stream else ["record"])]
    assert all(ms >= 0 for ms in phases.values()) and sum(phases.values()) <= latency_ms
    assert phases["model"] > 0


@pytest.mark.parametrize(("body", "param"), [
    (b"{not json", None),
    ([], None),
    ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
    ({"model": "default", "messages": []}, "messages"),
    ({"model": "default", "messages": [{"role": "wizard", "content": "hi"}]}, "messages"),
    ({"model": "default", "messages": [{"role": "user", "content": "hi"}], "tools": []}, "tools"),
    ({"model": "default", "messages": [{"role": "user", "content": "hi"}], "n": 2}, "n"),
    ({"model": "default", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, "temperature"),
    ({"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": True}, "max_tokens"),  # JSON true is not 1
    ({"model": "default", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}, "stream"),
    (b"[" * 100_000 + b"]" * 100_000, None),  # nested past any parser's recursion
    ({"model": "default", "messages": [{"role": "user", "content": "x " * 5000}]}, None),  # longer than the context
])
def test_bad_requests_get_an_openai_error_and_record_nothing(gateway, acme, body, param):
    response = post(gateway, acme.key, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"] and error["param"] == param
    assert not Interaction.objects.for_org(acme.org).exists()


def test_a_request_without_a_valid_key_is_refused(gateway, acme):
    assert post(gateway, None, {"model": "default", "messages": []}).status_code == 401
    assert post(gateway, acme.key + "x", {"model": "default", "messages": []}).json()["error"]["code"] == "invalid_api_key"


def test_a_request_that_will_be_refused_costs_neither_its_body_nor_the_database(gateway, acme, monkeypatch):
    from serving.gateway import views

    TrafficLimits.objects.create(org=acme.org, requests_per_minute=0)  # suspended: every request is a 429
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}]}
    assert post(gateway, acme.key, body).status_code == 429  # the key and the limits are now known for a second
    bodies, hops = [], []
    read_body, hop = views._body_of, views.in_db_thread

    async def counted_body(request):
        bodies.append(1)
        return await read_body(request)

    async def counted_hop(function, *args):
        hops.append(function.__name__)
        return await hop(function, *args)

    monkeypatch.setattr(views, "_body_of", counted_body)
    monkeypatch.setattr(views, "in_db_thread", counted_hop)
    response = post(gateway, acme.key, body)
    assert response.status_code == 429 and bodies == [] and hops == []


def test_the_database_down_is_a_503_not_a_500(gateway, acme, monkeypatch):
    from django.db import OperationalError

    from serving.gateway import views

    def down(raw_key):
        raise OperationalError("could not connect to server: Connection refused")

    monkeypatch.setattr(views, "api_key_authenticate", down)
    views._principals.forget(acme.key)  # a key known a moment ago would not ask the database
    response = post(gateway, acme.key, {"model": "default", "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 503 and response.json()["error"]["code"] == "database_unavailable"


def test_vllm_down_is_a_503_and_nothing_is_recorded(gateway, acme, settings):
    from serving.vllm_process import free_port

    settings.SERVING_VLLM_URLS = [f"http://127.0.0.1:{free_port()}"]
    with pytest.raises(openai.InternalServerError) as raised:
        ask(gateway_client(gateway, acme.key, max_retries=0))
    assert raised.value.status_code == 503 and "replica" in raised.value.message
    assert not Interaction.objects.for_org(acme.org).exists()


def test_a_replica_that_lost_its_adapters_gets_them_back(gateway, acme, vllm):
    from serving import vllm_client

    adapter = deployed_adapter(vllm, acme.org, seed=1)
    vllm_client.unload_adapter(vllm.url, name=adapter.name)  # as if the replica had restarted
    assert ask(gateway_client(gateway, acme.key)).model == adapter.name


def test_an_organization_over_its_limits_gets_429_with_retry_after(gateway, acme):
    TrafficLimits.objects.create(org=acme.org, requests_per_minute=2)
    api = gateway_client(gateway, acme.key, max_retries=0)
    ask(api), ask(api)
    with pytest.raises(openai.RateLimitError) as raised:
        ask(api)
    assert int(raised.value.response.headers["Retry-After"]) >= 1


def test_a_flood_from_one_organization_does_not_starve_another(gateway, acme, globex):
    from concurrent.futures import ThreadPoolExecutor

    TrafficLimits.objects.create(org=acme.org, max_concurrent=2)
    flooder = gateway_client(gateway, acme.key, max_retries=0)

    def flood(_):
        try:
            ask(flooder, max_tokens=16)
            return 200
        except openai.RateLimitError:
            return 429

    with ThreadPoolExecutor(max_workers=8) as pool:
        flooding = pool.map(flood, range(48))
        calm = [ask(gateway_client(gateway, globex.key, max_retries=0), max_tokens=16) for _ in range(4)]
        statuses = list(flooding)
    assert 429 in statuses and 200 in statuses
    assert len(calm) == 4 and all(c.choices[0].message.content is not None for c in calm)


def test_past_its_storage_quota_an_organization_is_refused_before_the_model_runs(gateway, acme, settings, monkeypatch):
    from serving.gateway import upstream

    settings.STORAGE_QUOTA_BYTES = 0
    called = []
    monkeypatch.setattr(upstream, "completion", lambda *args: called.append(args))
    with pytest.raises(openai.PermissionDeniedError) as raised:
        ask(gateway_client(gateway, acme.key, max_retries=0))
    assert raised.value.code == "storage_quota_exceeded" and called == []
    assert Interaction.objects.for_org(acme.org).count() == 0


@pytest.fixture
def limits_in_redis(settings, redis_url):
    """The gateway keeps its limits in Redis, as each of several gateway processes would."""
    from serving.gateway import views

    settings.LIMITS_REDIS_URL = redis_url
    views.limiter.cache_clear()
    yield redis_url
    views.limiter.cache_clear()


def test_with_redis_the_gateway_counts_what_other_gateway_processes_admitted(gateway, acme, limits_in_redis):
    from serving.gateway.limits import SharedLimiter
    from serving.traffic import traffic_limits_for

    TrafficLimits.objects.create(org=acme.org, max_concurrent=1)
    api, limits = gateway_client(gateway, acme.key, max_retries=0), traffic_limits_for(org=acme.org)

    async def another_process_holds_the_slot():
        other = SharedLimiter(limits_in_redis)
        slot = await other.admit(acme.org.pk, limits)
        with pytest.raises(openai.RateLimitError, match="in flight"):
            await asyncio.to_thread(ask, api)
        slot.release()
        await other.close()

    asyncio.run(another_process_holds_the_slot())
    assert ask(api).choices[0].message.content is not None


def test_a_client_that_drops_a_stream_gives_its_slot_back(gateway, acme):
    TrafficLimits.objects.create(org=acme.org, max_concurrent=1)
    body = {"model": "default", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 200, "stream": True}
    with httpx.stream("POST", f"{gateway}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {acme.key}"}, timeout=60) as response:
        assert response.status_code == 200
        next(response.iter_lines())
    for _ in range(50):  # the gateway notices the disconnect at its next chunk
        try:
            ask(gateway_client(gateway, acme.key, max_retries=0), max_tokens=2)
            return
        except openai.RateLimitError:
            time.sleep(0.1)
    pytest.fail("the dropped stream's slot was never given back")


def test_a_stream_its_client_drops_is_recorded_interrupted_and_takes_feedback(gateway, acme, monkeypatch):
    from serving.gateway import upstream

    lines = upstream.Completion.lines

    async def slowly(completion):  # a model slower than the tiny one: the drop comes mid-generation
        async for line in lines(completion):
            await asyncio.sleep(0.05)
            yield line

    monkeypatch.setattr(upstream.Completion, "lines", slowly)
    body = {"model": "default", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 200, "stream": True}
    with httpx.stream("POST", f"{gateway}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {acme.key}"}, timeout=60) as response:
        received = [json.loads(line[len("data: "):]) for line in itertools.islice(
            (line for line in response.iter_lines() if line.startswith("data: ")), 5)]  # a few tokens, then gone
    first = received[0]
    for _ in range(100):  # recorded once the gateway notices the disconnect, at its next chunk
        row = Interaction.objects.for_org(acme.org).filter(pk=first["id"]).first()
        if row is not None:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the dropped stream was never recorded")
    assert row.interrupted and 0 < row.completion_tokens < 200
    assert interaction_content(interaction=row)["completion"]  # what was generated until then
    event = {"interaction_id": first["id"], "type": "interrupted", "idempotency_key": "dropped-1"}
    assert acme.client.post("/api/v1/feedback", {"events": [event]}, format="json").json()["created"] == 1


def test_other_methods_and_paths_under_v1_get_openai_errors(gateway, acme):
    headers = {"Authorization": f"Bearer {acme.key}"}
    wrong_method = httpx.get(f"{gateway}/v1/chat/completions", headers=headers)
    assert wrong_method.status_code == 400 and wrong_method.json()["error"]["message"] == "Use POST."
    unknown = httpx.post(f"{gateway}/v1/completions", headers=headers, json={})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"


def test_a_revoked_key_stops_working_at_the_gateway_within_a_second(gateway, acme, cache_clock):
    from tenants.models import Role
    from tenants.organizations import Principal, api_key_create, api_key_revoke

    key_row, key = api_key_create(org=acme.org, name="agent", role="viewer", actor="test")
    api = gateway_client(gateway, key, max_retries=0)
    ask(api, max_tokens=1)
    api_key_revoke(api_key=key_row, by=Principal(org=acme.org, role=Role.OWNER, actor="test"))
    cache_clock.advance(1.0)
    with pytest.raises(openai.AuthenticationError):
        ask(api, max_tokens=1)


def test_a_body_over_the_size_limit_is_refused_before_it_is_read_whole(gateway, acme, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = post(gateway, acme.key, {"model": "default", "messages": [{"role": "user", "content": "x" * 20_000}]})
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"
    assert not Interaction.objects.for_org(acme.org).exists()
