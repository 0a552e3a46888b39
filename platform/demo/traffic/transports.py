"""How a simulated organization's software reaches the platform: the gateway's chat endpoint
through the official openai client, and the tenant REST API through demo.http.

The driver sees only the two small interfaces `Chat` and `Poster`, so it runs as well against
stand-ins that never touch a network.
"""

import http.client
import time
from dataclasses import dataclass
from typing import Protocol

import openai

from demo.http import Api, ApiError

MAX_TOKENS = 160  # the longest demo edit is about 55 tokens of the embedded model's tokenizer
# The gateway answers 429 with Retry-After when an organization exceeds its limits; the openai
# client waits and retries those (and 5xx, and dropped connections) by itself.
CHAT_RETRIES = 5
CHAT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Served:
    interaction_id: str  # the response's id: what feedback points at
    model: str  # the adapter version that served it, or the base model's name
    text: str  # the assistant message


class ChatFailed(Exception):
    """A chat call that failed for good, after the client's own retries."""

    def __init__(self, status: str):
        super().__init__(f"chat call failed: {status}")
        self.status = status  # the HTTP status, or "network"


class Undelivered(Exception):
    """A POST the platform refused (4xx), or a transient failure that outlasted the retries."""

    def __init__(self, status: str):
        super().__init__(f"not delivered: {status}")
        self.status = status  # the HTTP status, or "network"


class Chat(Protocol):
    def __call__(self, *, prompt: str, user: str, task_id: str | None) -> Served: ...


class Poster(Protocol):
    """The part of demo.http.Api the driver uses."""

    def post(self, path: str, body: dict) -> dict: ...


@dataclass(frozen=True)
class Tenant:
    """One organization's two ways into the platform."""

    chat: Chat
    api: Poster


@dataclass(frozen=True)
class Retry:
    attempts: int = 5  # tries in all, the first included
    backoff_s: float = 0.5  # before the second try; doubled before each next one

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff_s < 0:
            raise ValueError(f"a retry needs attempts >= 1 and backoff_s >= 0, not {self}")


DEFAULT_RETRY = Retry()


class OpenAIChat:
    """The gateway's chat completion, called exactly as a tenant's agent would call it."""

    def __init__(self, client: openai.OpenAI, *, model: str = "default", max_tokens: int = MAX_TOKENS):
        self.client, self.model, self.max_tokens = client, model, max_tokens

    def __call__(self, *, prompt: str, user: str, task_id: str | None) -> Served:
        try:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": "user", "content": prompt}],
                user=user,
                temperature=1.0,  # the loop learns from what the policy itself samples
                max_tokens=self.max_tokens,
                extra_body={"metadata": {"task_id": task_id}} if task_id else None,
            )
        except openai.APIStatusError as error:
            raise ChatFailed(str(error.status_code)) from error
        except openai.APIConnectionError as error:  # timeouts included
            raise ChatFailed("network") from error
        return Served(response.id, response.model, response.choices[0].message.content or "")


def connect(*, url: str, api_key: str, model: str = "default") -> Tenant:
    """The organization's clients for a platform at `url` (e.g. http://127.0.0.1:8000), asking
    for `model` (the organization's current adapter, or one of its versions by name)."""
    client = openai.OpenAI(
        base_url=f"{url.rstrip('/')}/v1", api_key=api_key, max_retries=CHAT_RETRIES, timeout=CHAT_TIMEOUT_S,
    )
    return Tenant(chat=OpenAIChat(client, model=model), api=Api(url, api_key))


def post_with_retries(api: Poster, path: str, body: dict, *, retry: Retry) -> dict:
    """POST `body`, retrying server errors, 408, 429 and network failures with exponential backoff.

    Only safe for idempotent requests (keys in the body) or ones whose repeat is harmless.
    Raises Undelivered with the last status when the platform refused it or the retries ran out.
    """
    status = ""
    for attempt in range(1, retry.attempts + 1):
        try:
            return api.post(path, body)
        except ApiError as error:
            status = str(error.status)
            if error.status < 500 and error.status not in (408, 429):
                break
        except (OSError, http.client.HTTPException):  # refused, reset, timed out, cut short
            status = "network"
        if attempt < retry.attempts:
            time.sleep(retry.backoff_s * 2 ** (attempt - 1))
    raise Undelivered(status)
