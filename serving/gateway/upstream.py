"""The gateway's side of the vLLM replicas: send the completion to one in rotation
(replicas.py), heal a replica that lost an adapter, and turn every way vLLM can fail into the
client's error: a refusal, a connection refused, a timeout, an answer broken off while it is read.

A request that a replica did not answer at all (no connection, or closed without a word) is
sent to the next one, and the first is asked once more at the end: nothing of it was served or
recorded. A replica that refuses a connection leaves the rotation at once. A replica
answering "no such model" for a routed adapter has restarted since the deployment and before
the watcher noticed: the adapter is loaded again and the request retried once. What is said to
vLLM, and how its refusals read, is vllm_client's.
"""

import asyncio
import json
import logging
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
from django.conf import settings

from serving import vllm_client
from serving.deployments import routed_adapters
from serving.gateway.database import in_db_thread
from serving.gateway.protocol import InvalidRequest, UpstreamUnavailable
from serving.gateway.replicas import Replica, Rotation
from serving.routing import Target

log = logging.getLogger(__name__)

_rotations: dict[tuple[str, ...], Rotation] = {}  # by the configured replicas' URLs
# httpx clients are bound to the event loop that made them; tests run several loops.
_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = weakref.WeakKeyDictionary()


class Completion:
    """vLLM's open, successful answer to a chat completion; a connection lost while it is
    read is an UpstreamUnavailable."""

    def __init__(self, response: httpx.Response):
        self._response = response

    async def payload(self) -> dict:
        """The whole answer of a call that is not streamed."""
        with _broken_off("response"):
            return json.loads(await self._response.aread())

    async def lines(self) -> AsyncIterator[str]:
        """A streamed answer's lines, as vLLM sends them."""
        with _broken_off("stream"):
            async for line in self._response.aiter_lines():
                yield line


@asynccontextmanager
async def completion(body: dict, target: Target) -> AsyncIterator[Completion]:
    """vLLM's answer to a chat completion (streamed or not), the caller's to read. Raises a
    GatewayError before yielding when no replica serves it."""
    with _broken_off("response"):
        replica, response = await _send(body, target)
    try:
        yield Completion(response)
    finally:
        replica.in_flight -= 1
        with _broken_off("response"):
            await response.aclose()


@contextmanager
def _broken_off(what: str) -> Iterator[None]:
    try:
        yield
    except httpx.HTTPError as error:
        raise UpstreamUnavailable(f"The model server broke off the {what}: {error!r}") from None


async def _send(body: dict, target: Target) -> tuple[Replica, httpx.Response]:
    if not settings.SERVING_VLLM_URLS:
        raise UpstreamUnavailable("No vLLM replicas are configured for this platform.")
    ordered = await rotation().in_order()
    # The first is asked again last, on a new connection: a pooled one its server had closed
    # fails like a dead server does.
    for replica in [*ordered, *ordered[:1]]:
        if not replica.in_rotation:  # it refused a connection a moment ago
            continue
        replica.in_flight += 1  # counted while waiting too: vLLM answers a non-streamed call at its end
        try:
            response = await _answer(replica.url, body, target)
        except BaseException as error:
            replica.in_flight -= 1
            if _unanswered(error):  # nothing came back, so nothing was served or recorded: the next one
                log.warning("vLLM replica %s did not take the request (%r); trying the next one", replica.url, error)
                if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
                    rotation().refused(replica)
                continue
            if isinstance(error, httpx.TimeoutException):
                raise UpstreamUnavailable(f"The model did not answer within {settings.SERVING_UPSTREAM_TIMEOUT_S} s.") from None
            raise
        return replica, response
    raise UpstreamUnavailable("No vLLM replica is ready right now; retry shortly.")


def _unanswered(error: BaseException) -> bool:
    """The replica could not be reached, or closed the connection without an answer (it died,
    or a pooled connection to it was stale). A replica that is only slow (a read timeout) is
    not asked again elsewhere: that would double the load that made it slow."""
    return isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError))


def rotation() -> Rotation:
    urls = tuple(settings.SERVING_VLLM_URLS)
    if urls not in _rotations:
        _rotations[urls] = Rotation(list(urls), client=_client, routed=lambda: in_db_thread(routed_adapters))
    return _rotations[urls]


async def _answer(url: str, body: dict, target: Target) -> httpx.Response:
    """One replica's successful response, loading the adapter again if it lost it."""
    response = await vllm_client.chat_completion_open(_client(), url, body)
    if response.status_code == 404 and not target.is_base:
        await response.aclose()
        await _load_adapter(url, target)
        response = await vllm_client.chat_completion_open(_client(), url, body)
    if response.is_error:
        await response.aread()
        await response.aclose()
        raise _client_error(vllm_client.refusal(response))
    return response


async def _load_adapter(url: str, target: Target) -> None:
    log.info("replica %s lacks %s (restarted?); loading it again", url, target.name)
    try:
        await vllm_client.load_adapter_on(_client(), url, name=target.name, path=target.adapter_path)
    except vllm_client.VllmError as refused:
        if "already" not in refused.detail:  # another request loaded it meanwhile
            raise UpstreamUnavailable(f"The adapter {target.name} could not be loaded on a replica: {refused.detail[:300]}") from None


def _client_error(refused: vllm_client.VllmError) -> Exception:
    """vLLM's refusal as the client's error: its 4xx (a prompt longer than the context, say)
    are the client's to fix; anything else is ours."""
    if refused.status in (400, 413, 422):
        return InvalidRequest(refused.detail)
    log.error("vLLM answered %s: %s", refused.status, refused.detail)
    return UpstreamUnavailable(f"The model server failed ({refused.status}); retry shortly.")


def _client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        timeout = httpx.Timeout(settings.SERVING_UPSTREAM_TIMEOUT_S, connect=2.0)
        client = _clients[loop] = httpx.AsyncClient(timeout=timeout, headers=vllm_client.auth_headers(),
                                                    limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))
    return client
