"""The gateway's side of the replicas against scripted ones (real servers on loopback, each
answering as the test says): how each way vLLM fails reaches the client. The real server is in
test_gateway.py."""

import asyncio
from pathlib import Path

import pytest

from serving.gateway import upstream
from serving.gateway.protocol import InvalidRequest, UpstreamUnavailable
from serving.gateway.replicas import Rotation
from serving.routing import Target
from tests.serving.scripted_replicas import Answer, ScriptedReplicas

ADAPTER = Target(name="acme@v1", adapter_path=Path("adapters/acme/v1"))
BODY = {"model": "acme@v1", "messages": [{"role": "user", "content": "hi"}]}
ANSWERED = Answer(body={"choices": []})


@pytest.fixture
def replicas(settings, monkeypatch):
    scripted = ScriptedReplicas(["one", "two"])
    settings.SERVING_VLLM_URLS = [scripted.url("one"), scripted.url("two")]
    monkeypatch.setattr(upstream, "rotation", lambda: rotation)

    async def nothing_routed():
        return {}

    rotation = Rotation(settings.SERVING_VLLM_URLS, session=upstream._session, routed=nothing_routed)
    yield scripted
    scripted.close()


def answering(replicas: ScriptedReplicas, name: str, answer) -> None:
    """`name` answers the rotation's looks (serving nothing routed) and every other call with `answer`."""
    def script(path: str, body):
        if path == "/v1/models":
            return Answer(body={"data": [{"id": "base", "root": "/models/base"}]})
        return answer(path, body) if callable(answer) else answer
    replicas.scripts[name] = script


def calls(replicas: ScriptedReplicas) -> list[tuple[str, str]]:
    return [(name, path) for name, path in replicas.received if path != "/v1/models"]


def on_a_loop(work):
    """`work()` on a new event loop (as each test of the gateway gets), its session closed after."""
    async def closing():
        try:
            return await work()
        finally:
            await upstream._session().close()
    return asyncio.run(closing())


async def whole(completion: upstream.Completion) -> dict:
    return await completion.payload()


async def streamed(completion: upstream.Completion) -> list[str]:
    return [line async for line in completion.lines()]


def served(read=whole):
    async def request():
        async with upstream.completion(BODY, ADAPTER) as completion:
            return await read(completion)
    return on_a_loop(request)


def refusing(status: int, message: str) -> Answer:
    return Answer(status=status, body={"error": {"message": message, "type": "BadRequestError", "code": status}})


def test_a_refusal_of_the_clients_request_is_an_invalid_request_with_vllms_words(replicas):
    answering(replicas, "one", refusing(400, "This model's maximum context length is 512 tokens."))
    with pytest.raises(InvalidRequest, match="maximum context length"):
        served()


def test_a_failing_replica_is_unavailable_without_its_words(replicas):
    answering(replicas, "one", refusing(500, "CUDA out of memory"))
    with pytest.raises(UpstreamUnavailable, match=r"failed \(500\)") as raised:
        served()
    assert "CUDA" not in raised.value.message


def test_a_replica_that_lost_the_adapter_gets_it_again_and_the_request_is_retried(replicas):
    loaded = []

    def replica(path: str, body) -> Answer:
        if path == "/v1/load_lora_adapter":
            loaded.append(body)
            return Answer(body="Success")
        return ANSWERED if loaded else refusing(404, "The model `acme@v1` does not exist.")

    answering(replicas, "one", replica)
    assert served() == {"choices": []}
    assert loaded == [{"lora_name": "acme@v1", "lora_path": str(ADAPTER.adapter_path)}]
    assert [path for _, path in calls(replicas)] == ["/v1/chat/completions", "/v1/load_lora_adapter", "/v1/chat/completions"]


def test_an_adapter_that_cannot_be_loaded_again_is_unavailable(replicas):
    answering(replicas, "one", refusing(404, "No adapter files at adapters/acme/v1."))
    with pytest.raises(UpstreamUnavailable, match="could not be loaded on a replica: No adapter files"):
        served()


def test_a_request_that_could_not_connect_goes_to_the_next_replica_which_takes_the_traffic_from_then_on(replicas):
    answering(replicas, "one", ANSWERED)
    answering(replicas, "two", ANSWERED)

    async def three_requests_and_one_dies_after_the_first():
        async with upstream.completion(BODY, ADAPTER) as completion:
            await completion.payload()
        replicas.stop("one")
        for _ in range(2):
            async with upstream.completion(BODY, ADAPTER) as completion:
                assert await completion.payload() == {"choices": []}
        return [replica.url for replica in await upstream.rotation().in_order()]

    assert on_a_loop(three_requests_and_one_dies_after_the_first) == [replicas.url("two")]
    assert [name for name, _ in calls(replicas)] == ["one", "two", "two"]


def test_a_connection_closed_unanswered_is_asked_again_and_is_not_a_failure(settings, replicas, monkeypatch):
    """One replica: a connection closed without an answer (as a pooled one its server had
    closed fails) is retried on a new one."""
    alone = Rotation([replicas.url("one")], session=upstream._session, routed=upstream.rotation()._routed)
    monkeypatch.setattr(upstream, "rotation", lambda: alone)
    answers = iter([Answer(hang_up=True), ANSWERED])
    answering(replicas, "one", lambda path, body: next(answers))
    assert served() == {"choices": []}
    assert calls(replicas) == [("one", "/v1/chat/completions")]


@pytest.mark.parametrize(("read", "what"), [(whole, "response"), (streamed, "stream")])
def test_an_answer_broken_off_while_it_is_read_is_unavailable(replicas, read, what):
    answering(replicas, "one", Answer(cut_off=True))
    with pytest.raises(UpstreamUnavailable, match=f"broke off the {what}: ClientPayloadError"):
        served(read)


def test_an_answer_that_is_not_json_is_unavailable_not_a_server_error(replicas):
    """A proxy's error page, a server half up: the client gets a 503 it may retry."""
    answering(replicas, "one", Answer(body="<html>502 Bad Gateway</html>"))
    with pytest.raises(UpstreamUnavailable, match="could not be read"):
        served()
