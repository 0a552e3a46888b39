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

import aiohttp
from django.conf import settings

from serving import vllm_client
from serving.deployments import routed_adapters
from serving.gateway.database import in_db_thread
from serving.gateway.protocol import InvalidRequest, UpstreamUnavailable
from serving.gateway.replicas import Replica, Rotation
from serving.routing import Target

log = logging.getLogger(__name__)

_rotations: dict[tuple[str, ...], Rotation] = {}  # by the configured replicas' URLs
# Sessions are bound to the event loop that made them; tests run several loops.
_sessions: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession]" = weakref.WeakKeyDictionary()

# Pooled connections are dropped before vLLM's server would close them (uvicorn: after 5 s idle),
# so that few requests meet a connection closed under them.
KEEPALIVE_S = 4.0


class Completion:
    """vLLM's open, successful answer to a chat completion; a connection lost while it is
    read is an UpstreamUnavailable."""

    def __init__(self, response: aiohttp.ClientResponse):
        self._response = response

    async def payload(self) -> dict:
        """The whole answer of a call that is not streamed."""
        with _broken_off("response"):
            return json.loads(await self._response.read())

    async def lines(self) -> AsyncIterator[str]:
        """A streamed answer's lines, as vLLM sends them (without their line ends). Split here
        rather than by aiohttp's readline, which refuses lines past its buffer: the first line
        of a stream holds the prompt's token ids, as long as the prompt."""
        with _broken_off("stream"):
            pending = b""
            async for chunk in self._response.content.iter_any():
                *complete, pending = (pending + chunk).split(b"\n")
                for line in complete:
                    yield line.rstrip(b"\r").decode()
            if pending:
                yield pending.decode()


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
        response.release()  # a body not read to its end closes the connection: vLLM stops generating


@contextmanager
def _broken_off(what: str) -> Iterator[None]:
    try:
        yield
    except aiohttp.ClientError as error:
        raise UpstreamUnavailable(f"The model server broke off the {what}: {error!r}", model_worked=True) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:  # a proxy's page, a server half up
        raise UpstreamUnavailable(f"The model server's {what} could not be read: {error}") from None


async def _send(body: dict, target: Target) -> tuple[Replica, aiohttp.ClientResponse]:
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
                if isinstance(error, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)):
                    rotation().refused(replica)
                continue
            if isinstance(error, asyncio.TimeoutError):
                raise UpstreamUnavailable(f"The model did not answer within {settings.SERVING_UPSTREAM_TIMEOUT_S} s.",
                                          model_worked=True) from None
            raise
        replica.answered = True
        return replica, response
    raise UpstreamUnavailable("No vLLM replica is ready right now; retry shortly.")


def _unanswered(error: BaseException) -> bool:
    """The replica could not be reached, or closed the connection without an answer (it died,
    or a pooled connection to it was stale). A replica that is only slow (a read timeout) is
    not asked again elsewhere: that would double the load that made it slow."""
    if isinstance(error, aiohttp.SocketTimeoutError):
        return False
    return isinstance(error, aiohttp.ClientConnectionError)


def rotation() -> Rotation:
    urls = tuple(settings.SERVING_VLLM_URLS)
    if urls not in _rotations:
        _rotations[urls] = Rotation(list(urls), session=_session, routed=lambda: in_db_thread(routed_adapters))
    return _rotations[urls]


async def _answer(url: str, body: dict, target: Target) -> aiohttp.ClientResponse:
    """One replica's successful response, loading the adapter again if it lost it."""
    response = await vllm_client.chat_completion_open(_session(), url, body)
    if response.status == 404 and not target.is_base:
        await response.read()  # so that its connection is pooled again
        response.release()
        await _load_adapter(url, target)
        response = await vllm_client.chat_completion_open(_session(), url, body)
    if response.status >= 400:
        refused = await vllm_client.refused(response)
        response.release()
        raise _client_error(refused)
    return response


async def _load_adapter(url: str, target: Target) -> None:
    log.info("replica %s lacks %s (restarted?); loading it again", url, target.name)
    try:
        await vllm_client.load_adapter_on(_session(), url, name=target.name, path=target.adapter_path)
    except vllm_client.VllmError as refused:
        if "already" not in refused.detail:  # another request loaded it meanwhile
            raise UpstreamUnavailable(f"The adapter {target.name} could not be loaded on a replica: {refused.detail[:300]}") from None


def _client_error(refused: vllm_client.VllmError) -> Exception:
    """vLLM's refusal as the client's error: its 4xx (a prompt longer than the context, say)
    are the client's to fix; anything else is ours."""
    if refused.status in (400, 413, 422):
        return InvalidRequest(refused.detail, model_worked=True)  # it read the request to refuse it (a prompt too long)
    log.error("vLLM answered %s: %s", refused.status, refused.detail)
    return UpstreamUnavailable(f"The model server failed ({refused.status}); retry shortly.")


async def close() -> None:
    """Close this event loop's session to the replicas and stop their watcher (at shutdown)."""
    for rotation in _rotations.values():
        await rotation.close()
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


def _session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        # A read timeout bounds the wait for each part of an answer (its start, then each chunk
        # of a stream), not the whole of a long generation.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=2.0, sock_read=settings.SERVING_UPSTREAM_TIMEOUT_S)
        connector = aiohttp.TCPConnector(limit=256, keepalive_timeout=KEEPALIVE_S)
        session = _sessions[loop] = aiohttp.ClientSession(timeout=timeout, headers=vllm_client.auth_headers(), connector=connector)
    return session
