"""Calls to a running vLLM server: its adapter endpoints (runtime LoRA updating must be on), and
the direct sampling the gates use (never through the gateway: nothing is recorded).

Django-free; the registry, deployments and gates decide *what* to ask, this only says it to vLLM.
"""

import json
import urllib.error
import urllib.request
from pathlib import Path


class VllmError(RuntimeError):
    """vLLM refused or failed a request; the message holds its answer."""


def load_adapter(base_url: str, *, name: str, path: Path, timeout: float = 60.0) -> None:
    """Make `name` servable on this replica from the adapter directory `path`."""
    _post(base_url, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)}, timeout)


def unload_adapter(base_url: str, *, name: str, timeout: float = 60.0) -> None:
    _post(base_url, "/v1/unload_lora_adapter", {"lora_name": name}, timeout)


def served_models(base_url: str, timeout: float = 10.0) -> set[str]:
    """The names this replica serves: its base model and every loaded adapter."""
    return set(served_roots(base_url, timeout))


def served_roots(base_url: str, timeout: float = 10.0) -> dict[str, str]:
    """Each served name with the files it was loaded from (vLLM's `root`)."""
    with urllib.request.urlopen(base_url.rstrip("/") + "/v1/models", timeout=timeout) as response:
        return {model["id"]: model.get("root", "") for model in json.loads(response.read())["data"]}


def chat_sample(base_url: str, *, model: str, messages: list[dict], max_tokens: int, temperature: float = 1.0,
                timeout: float = 120.0) -> tuple[str, int]:
    """One sampled completion of `messages` by `model` (the base or a loaded adapter): its text
    and its number of tokens."""
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature}
    answer = _post(base_url, "/v1/chat/completions", body, timeout)
    return answer["choices"][0]["message"]["content"] or "", answer["usage"]["completion_tokens"]


def _post(base_url: str, path: str, body: dict, timeout: float) -> dict:
    request = urllib.request.Request(
        base_url.rstrip("/") + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return json.loads(raw) if raw.strip().startswith(b"{") else {}
    except urllib.error.HTTPError as error:
        what = body.get("lora_name") or body.get("model")
        raise VllmError(f"{path} {what!r}: HTTP {error.code} {error.read()[:500].decode(errors='replace')}") from None
    except OSError as error:
        raise VllmError(f"{path}: vLLM at {base_url} did not answer: {error}") from None
