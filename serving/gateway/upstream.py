"""The gateway's side of the vLLM replicas: pick one, send the completion, heal a replica
that lost an adapter, and turn every way vLLM can fail into the client's error.

Requests go to the replica with the fewest of this process's requests in flight; one that
refuses connections is skipped for a few seconds. A replica answering "no such model" for
a routed adapter has restarted since the deployment: the adapter is loaded again and the
request retried once.
"""

import asyncio
import json
import logging
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from django.conf import settings

from serving.gateway.protocol import InvalidRequest, UpstreamUnavailable
from serving.routing import Target

log = logging.getLogger(__name__)

DOWN_FOR_S = 5.0  # how long a replica that refused a connection is tried last

_in_flight: Counter[str] = Counter()
_down_until: dict[str, float] = {}
# httpx clients are bound to the event loop that made them; tests run several loops.
_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = weakref.WeakKeyDictionary()


@asynccontextmanager
async def completion(body: dict, target: Target) -> AsyncIterator[httpx.Response]:
    """An open, successful vLLM response to a chat completion (streamed or not); its body is
    the caller's to read. Raises a GatewayError before yielding when no replica serves it."""
    url, response = await _send(body, target)
    try:
        yield response
    finally:
        _in_flight[url] -= 1
        await response.aclose()


async def _send(body: dict, target: Target) -> tuple[str, httpx.Response]:
    urls = _replicas_in_order()
    if not urls:
        raise UpstreamUnavailable("No vLLM replicas are configured for this platform.")
    for url in urls:
        _in_flight[url] += 1  # counted while waiting too: vLLM answers a non-streamed call at its end
        try:
            response = await _answer(url, body, target)
        except BaseException as error:
            _in_flight[url] -= 1
            if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
                _down_until[url] = time.monotonic() + DOWN_FOR_S
                log.warning("vLLM replica %s refused the connection; trying the next one", url)
                continue
            if isinstance(error, httpx.TimeoutException):
                raise UpstreamUnavailable(f"The model did not answer within {settings.SERVING_UPSTREAM_TIMEOUT_S} s.") from None
            raise
        _down_until.pop(url, None)
        return url, response
    raise UpstreamUnavailable("No vLLM replica is reachable right now; retry shortly.")


async def _answer(url: str, body: dict, target: Target) -> httpx.Response:
    """One replica's successful response, loading the adapter again if it lost it."""
    response = await _post(url, body)
    if response.status_code == 404 and not target.is_base:
        await response.aclose()
        await _load_adapter(url, target)
        response = await _post(url, body)
    if response.status_code >= 400:
        raise await _error_of(response)
    return response


async def _post(url: str, body: dict) -> httpx.Response:
    client = _client()
    return await client.send(client.build_request("POST", f"{url}/v1/chat/completions", json=body), stream=True)


async def _load_adapter(url: str, target: Target) -> None:
    log.info("replica %s lacks %s (restarted?); loading it again", url, target.name)
    response = await _client().post(f"{url}/v1/load_lora_adapter", json={"lora_name": target.name, "lora_path": str(target.adapter_path)})
    if response.status_code >= 400 and "already" not in response.text:
        raise UpstreamUnavailable(f"The adapter {target.name} could not be loaded on a replica: {response.text[:300]}")


async def _error_of(response: httpx.Response) -> Exception:
    """vLLM's refusal as the client's error: its 4xx (a prompt longer than the context, say)
    are the client's to fix; anything else is ours."""
    raw = await response.aread()
    await response.aclose()
    try:
        message = json.loads(raw)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = raw[:300].decode(errors="replace")
    if response.status_code in (400, 413, 422):
        return InvalidRequest(message)
    log.error("vLLM answered %s: %s", response.status_code, message)
    return UpstreamUnavailable(f"The model server failed ({response.status_code}); retry shortly.")


def _replicas_in_order() -> list[str]:
    now = time.monotonic()
    urls = [url.rstrip("/") for url in settings.SERVING_VLLM_URLS]
    return sorted(urls, key=lambda url: (_down_until.get(url, 0.0) > now, _in_flight[url]))


def _client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        timeout = httpx.Timeout(settings.SERVING_UPSTREAM_TIMEOUT_S, connect=2.0)
        client = _clients[loop] = httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))
    return client
