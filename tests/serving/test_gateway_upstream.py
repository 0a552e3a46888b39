"""The gateway's side of the replicas against scripted ones (httpx's mock transport): how each
way vLLM fails reaches the client. The real server is in test_gateway.py."""

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from serving.gateway import upstream
from serving.gateway.protocol import InvalidRequest, UpstreamUnavailable
from serving.gateway.replicas import Rotation
from serving.routing import Target

ADAPTER = Target(name="acme@v1", adapter_path=Path("adapters/acme/v1"))
BODY = {"model": "acme@v1", "messages": [{"role": "user", "content": "hi"}]}


class BrokenOff(httpx.AsyncByteStream):
    async def __aiter__(self):
        yield b'{"choices": ['
        raise httpx.ReadError("connection reset by peer")


@dataclass
class Replicas:
    answers: dict = field(default_factory=dict)  # by replica url: what answers each request sent to it
    sent: list[tuple[str, str]] = field(default_factory=list)  # (replica url, path) of each request, in order

    dead: set[str] = field(default_factory=set)  # replicas that refuse every connection

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = f"{request.url.scheme}://{request.url.host}"
        if url in self.dead and request.url.path == "/v1/models":
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path == "/v1/models":  # the rotation's looks: every replica answers, serving nothing routed
            return httpx.Response(200, json={"data": [{"id": "base", "root": "/models/base"}]})
        self.sent.append((url, request.url.path))
        if url in self.dead:
            raise httpx.ConnectError("connection refused", request=request)
        return self.answers[url](request)


@pytest.fixture
def replicas(settings, monkeypatch) -> Replicas:
    settings.SERVING_VLLM_URLS = ["http://one", "http://two"]
    scripted = Replicas()
    client = lambda: httpx.AsyncClient(transport=httpx.MockTransport(scripted.handle))  # noqa: E731
    monkeypatch.setattr(upstream, "_client", client)

    async def nothing_routed():
        return {}

    rotation = Rotation(settings.SERVING_VLLM_URLS, client=client, routed=nothing_routed)
    monkeypatch.setattr(upstream, "rotation", lambda: rotation)
    return scripted


async def whole(completion: upstream.Completion) -> dict:
    return await completion.payload()


async def streamed(completion: upstream.Completion) -> list[str]:
    return [line async for line in completion.lines()]


def served(read=whole):
    async def request():
        async with upstream.completion(BODY, ADAPTER) as completion:
            return await read(completion)
    return asyncio.run(request())


def refusing(status: int, message: str):
    return lambda request: httpx.Response(status, json={"error": {"message": message, "type": "BadRequestError", "code": status}})


def test_a_refusal_of_the_clients_request_is_an_invalid_request_with_vllms_words(replicas):
    replicas.answers["http://one"] = refusing(400, "This model's maximum context length is 512 tokens.")
    with pytest.raises(InvalidRequest, match="maximum context length"):
        served()


def test_a_failing_replica_is_unavailable_without_its_words(replicas):
    replicas.answers["http://one"] = refusing(500, "CUDA out of memory")
    with pytest.raises(UpstreamUnavailable, match=r"failed \(500\)") as raised:
        served()
    assert "CUDA" not in raised.value.message


def test_a_replica_that_lost_the_adapter_gets_it_again_and_the_request_is_retried(replicas):
    loaded = []

    def replica(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/load_lora_adapter":
            loaded.append(json.loads(request.content))
            return httpx.Response(200, text="Success")
        if not loaded:
            return refusing(404, "The model `acme@v1` does not exist.")(request)
        return httpx.Response(200, json={"choices": []})

    replicas.answers["http://one"] = replica
    assert served() == {"choices": []}
    assert loaded == [{"lora_name": "acme@v1", "lora_path": str(ADAPTER.adapter_path)}]
    assert [path for _, path in replicas.sent] == ["/v1/chat/completions", "/v1/load_lora_adapter", "/v1/chat/completions"]


def test_an_adapter_that_cannot_be_loaded_again_is_unavailable(replicas):
    replicas.answers["http://one"] = refusing(404, "No adapter files at adapters/acme/v1.")
    with pytest.raises(UpstreamUnavailable, match="could not be loaded on a replica: No adapter files"):
        served()


def test_a_request_that_could_not_connect_goes_to_the_next_replica_which_takes_the_traffic_from_then_on(replicas):
    answering = lambda request: httpx.Response(200, json={"choices": []})  # noqa: E731
    replicas.answers["http://one"] = replicas.answers["http://two"] = answering

    async def three_requests_and_one_dies_after_the_first():
        async with upstream.completion(BODY, ADAPTER) as completion:
            await completion.payload()
        replicas.dead.add("http://one")
        for _ in range(2):
            async with upstream.completion(BODY, ADAPTER) as completion:
                assert await completion.payload() == {"choices": []}

    asyncio.run(three_requests_and_one_dies_after_the_first())
    assert [url for url, _ in replicas.sent] == ["http://one", "http://one", "http://two", "http://two"]


def test_a_connection_its_replica_had_closed_is_not_a_failure(replicas, monkeypatch):
    """One replica: the pooled connection fails like a dead server; a new one is answered."""
    alone = Rotation(["http://one"], client=upstream._client, routed=upstream.rotation()._routed)
    monkeypatch.setattr(upstream, "rotation", lambda: alone)
    answers = iter([httpx.RemoteProtocolError("Server disconnected without sending a response."), None])

    def replica(request):
        if (error := next(answers)) is not None:
            raise error
        return httpx.Response(200, json={"choices": []})

    replicas.answers["http://one"] = replica
    assert served() == {"choices": []}
    assert [url for url, _ in replicas.sent] == ["http://one", "http://one"]


@pytest.mark.parametrize(("read", "what"), [(whole, "response"), (streamed, "stream")])
def test_an_answer_broken_off_while_it_is_read_is_unavailable(replicas, read, what):
    replicas.answers["http://one"] = lambda request: httpx.Response(200, stream=BrokenOff())
    with pytest.raises(UpstreamUnavailable, match=f"broke off the {what}: ReadError"):
        served(read)
