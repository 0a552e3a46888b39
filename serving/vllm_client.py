"""The platform's one client of a vLLM server (OpenAI-compatible, runtime LoRA updating on):
the endpoints it calls, what it sends them, and how vLLM's refusals read.

The control plane calls it synchronously and gets a VllmError for any failure: deployments
load and unload adapters, the gates sample directly (never through the gateway: nothing is
recorded), the process manager waits for /health. The gateway sends the same requests on
its own pooled `httpx.AsyncClient` and handles a failed connection itself (it tries another
replica), so the async calls raise VllmError only for vLLM's refusals.

Django-free; callers decide *what* to ask, this only says it to vLLM, with the replicas' API
key (`use_api_key`) on every call; the gateway's client carries `auth_headers()` too.
"""

import json
from pathlib import Path

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
        raise refusal(response, what=what)
    return response.json() if response.content.strip().startswith(b"{") else {}


# The gateway's calls, on its client; their body is the caller's to read and close ---------------

async def chat_completion_open(client: httpx.AsyncClient, base_url: str, body: dict) -> httpx.Response:
    """vLLM's streamed response to a chat completion, a refusal too (see `refusal`)."""
    request = client.build_request("POST", _url(base_url, CHAT_COMPLETIONS), json=body)
    return await client.send(request, stream=True)


async def load_adapter_on(client: httpx.AsyncClient, base_url: str, *, name: str, path: Path) -> None:
    """`load_adapter` for the gateway: raises VllmError when vLLM refuses."""
    response = await client.post(_url(base_url, LOAD_ADAPTER), json=_adapter(name, path))
    if response.is_error:
        raise refusal(response, what=name)


async def served_roots_on(client: httpx.AsyncClient, base_url: str, *, timeout: float) -> dict[str, str]:
    """`served_roots` for the gateway's watcher: raises httpx's errors when vLLM does not answer,
    VllmError when it refuses."""
    response = await client.get(_url(base_url, MODELS), timeout=timeout)
    if response.is_error:
        raise refusal(response)
    return {model["id"]: model.get("root", "") for model in response.json()["data"]}


async def unload_adapter_on(client: httpx.AsyncClient, base_url: str, *, name: str) -> None:
    response = await client.post(_url(base_url, UNLOAD_ADAPTER), json={"lora_name": name})
    if response.is_error:
        raise refusal(response, what=name)


# Shared by both -------------------------------------------------------------------------------

def refusal(response: httpx.Response, *, what: str | None = None) -> VllmError:
    """vLLM's answer of status 400 or more, its body read, as a VllmError: the message of its
    JSON error when it sent one, else the start of its body."""
    try:
        detail = json.loads(response.content)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        detail = response.content[:500].decode(errors="replace")
    where = response.request.url.path + (f" {what!r}" if what else "")
    return VllmError(f"{where}: HTTP {response.status_code} {detail}", status=response.status_code, detail=detail)


def _adapter(name: str, path: Path) -> dict:
    return {"lora_name": name, "lora_path": str(path)}


def _url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + path
