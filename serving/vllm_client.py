"""The platform's one client of a vLLM server (OpenAI-compatible, runtime LoRA updating on):
the endpoints it calls, what it sends them, and how vLLM's refusals read.

The control plane calls it synchronously and gets a VllmError for any failure: deployments
load and unload adapters, the gates sample directly (never through the gateway: nothing is
recorded), the process manager waits for /health. The gateway sends the same requests on
its own pooled `aiohttp.ClientSession` (an httpx client cost the gateway five times its CPU
per request: docs/figures.md) and handles a failed connection itself (it tries another
replica), so the async calls raise VllmError only for vLLM's refusals.

Django-free; callers decide *what* to ask, this only says it to vLLM, with the replicas' API
key (`use_api_key`) on every call; the gateway's client carries `auth_headers()` too.
"""

import json
from pathlib import Path

import aiohttp
import httpx

LOAD_ADAPTER = "/v1/load_lora_adapter"
UNLOAD_ADAPTER = "/v1/unload_lora_adapter"
MODELS = "/v1/models"
CHAT_COMPLETIONS = "/v1/chat/completions"
HEALTH = "/health"


_api_key: str | None = None


def use_api_key(key: str | None) -> None:
    """The key the replicas require (serving's app config sets it from the settings)."""
    global _api_key
    _api_key = key


def auth_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {_api_key}"} if _api_key else {}


class VllmError(RuntimeError):
    """vLLM refused or failed a request, or did not answer; the message holds its answer.
    `status` is the HTTP status of a refusal (None: no answer), `detail` vLLM's own words."""

    def __init__(self, message: str, *, status: int | None = None, detail: str = ""):
        super().__init__(message)
        self.status, self.detail = status, detail


# The control plane's calls -------------------------------------------------------------------

def load_adapter(base_url: str, *, name: str, path: Path, timeout: float = 60.0) -> None:
    """Make `name` servable on this replica from the adapter directory `path`."""
    _call(base_url, LOAD_ADAPTER, body=_adapter(name, path), what=name, timeout=timeout)


def unload_adapter(base_url: str, *, name: str, timeout: float = 60.0) -> None:
    _call(base_url, UNLOAD_ADAPTER, body={"lora_name": name}, what=name, timeout=timeout)


def served_models(base_url: str, timeout: float = 10.0) -> set[str]:
    """The names this replica serves: its base model and every loaded adapter."""
    return set(served_roots(base_url, timeout))


def served_roots(base_url: str, timeout: float = 10.0) -> dict[str, str]:
    """Each served name with the files it was loaded from (vLLM's `root`)."""
    answer = _call(base_url, MODELS, timeout=timeout)
    return {model["id"]: model.get("root", "") for model in answer["data"]}


def chat_sample(base_url: str, *, model: str, messages: list[dict], max_tokens: int, temperature: float = 1.0,
                timeout: float = 120.0) -> tuple[str, int]:
    """One sampled completion of `messages` by `model` (the base or a loaded adapter): its text
    and its number of tokens."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature}
    answer = _call(base_url, CHAT_COMPLETIONS, body=body, what=model, timeout=timeout)
    return answer["choices"][0]["message"]["content"] or "", answer["usage"]["completion_tokens"]


def is_healthy(base_url: str, timeout: float = 2.0) -> bool:
    try:
        return httpx.get(_url(base_url, HEALTH), timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _call(base_url: str, path: str, *, body: dict | None = None, what: str | None = None, timeout: float) -> dict:
    """vLLM's JSON answer (an empty dict for its plain-text ones); a POST when there is a body."""
    try:
        with httpx.Client(timeout=timeout, headers=auth_headers()) as client:
            response = client.request("GET" if body is None else "POST", _url(base_url, path), json=body)
    except httpx.HTTPError as error:
        raise VllmError(f"{path}: vLLM at {base_url} did not answer: {error!r}") from None
    if response.is_error:
        raise refusal(path=response.request.url.path, status=response.status_code, content=response.content, what=what)
    return response.json() if response.content.strip().startswith(b"{") else {}


# The gateway's calls, on its session; a chat completion's body is the caller's to read and release

async def chat_completion_open(session: aiohttp.ClientSession, base_url: str, body: dict) -> aiohttp.ClientResponse:
    """vLLM's response to a chat completion, its body unread (streamed or not), a refusal too
    (see `refused`)."""
    return await session.post(_url(base_url, CHAT_COMPLETIONS), json=body)


async def load_adapter_on(session: aiohttp.ClientSession, base_url: str, *, name: str, path: Path) -> None:
    """`load_adapter` for the gateway: raises VllmError when vLLM refuses."""
    async with session.post(_url(base_url, LOAD_ADAPTER), json=_adapter(name, path)) as response:
        if response.status >= 400:
            raise await refused(response, what=name)


async def served_roots_on(session: aiohttp.ClientSession, base_url: str, *, timeout: float) -> dict[str, str]:
    """`served_roots` for the gateway's watcher: raises aiohttp's errors when vLLM does not
    answer, VllmError when it refuses."""
    async with session.get(_url(base_url, MODELS), timeout=aiohttp.ClientTimeout(total=timeout)) as response:
        if response.status >= 400:
            raise await refused(response)
        answer = json.loads(await response.read())
    return {model["id"]: model.get("root", "") for model in answer["data"]}


async def unload_adapter_on(session: aiohttp.ClientSession, base_url: str, *, name: str) -> None:
    async with session.post(_url(base_url, UNLOAD_ADAPTER), json={"lora_name": name}) as response:
        if response.status >= 400:
            raise await refused(response, what=name)


async def refused(response: aiohttp.ClientResponse, *, what: str | None = None) -> VllmError:
    """`refusal` of a response on the gateway's session, its body read here."""
    return refusal(path=response.url.path, status=response.status, content=await response.read(), what=what)


# Shared by both -------------------------------------------------------------------------------

def refusal(*, path: str, status: int, content: bytes, what: str | None = None) -> VllmError:
    """vLLM's answer of status 400 or more to a call of `path`, as a VllmError: the message of
    its JSON error when it sent one, else the start of its body."""
    try:
        detail = json.loads(content)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        detail = content[:500].decode(errors="replace")
    where = path + (f" {what!r}" if what else "")
    return VllmError(f"{where}: HTTP {status} {detail}", status=status, detail=detail)


def _adapter(name: str, path: Path) -> dict:
    return {"lora_name": name, "lora_path": str(path)}


def _url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + path
