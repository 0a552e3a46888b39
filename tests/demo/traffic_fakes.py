"""Stand-ins of the platform for the traffic driver's tests: the tenant REST API (FakeApi) and
the gateway (FakeChat, which records each ChatCall) in memory, a Clock the test sets, the fields
a feedback event may carry, and the answers and event lists the outbox, driver and wire tests
share; nothing here talks to a network or a database."""

import json
import random
import threading
import time
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from demo.domain import parse_prompt, render_edit, render_function
from demo.domain.generate import sample_response
from demo.traffic.transports import ChatFailed, Served
from tests.demo.pinned_persona import PLEASING

# The fields of a feedback event in SPEC 8.
EVENT_FIELDS = {"interaction_id", "type", "idempotency_key", "value", "occurred_at"}


class FakeApi:
    """The tenant REST API in memory: records each POST, fails as told, else answers like the platform."""

    def __init__(self, failures: Sequence[Exception] = ()):
        self.posts: list[tuple[str, dict, float]] = []  # path, body, when (monotonic)
        self._failures = list(failures)
        self._lock = threading.Lock()

    def post(self, path: str, body: dict) -> dict:
        with self._lock:
            self.posts.append((path, json.loads(json.dumps(body)), time.monotonic()))
            if self._failures:
                raise self._failures.pop(0)
        return {"id": str(uuid.uuid4())} if path == "/api/v1/tasks" else {}

    def batches(self) -> list[list[dict]]:
        return [body["events"] for path, body, _ in self.posts if path == "/api/v1/feedback"]

    def events(self) -> list[dict]:
        return [event for batch in self.batches() for event in batch]

    def outcomes(self) -> list[tuple[str, dict]]:
        return [(path, body) for path, body, _ in self.posts if path.endswith("/outcome")]


class ChatCall(NamedTuple):
    prompt: str
    user: str
    task_id: str | None
    interaction_id: str


class FakeChat:
    """The gateway in memory. `answer` writes the response to a prompt text."""

    def __init__(self, answer=None, model: str = "acme@v1", fail_every: int = 0):
        self.calls: list[ChatCall] = []
        self.answer = answer or base_policy
        self.model, self.fail_every = model, fail_every
        self._lock = threading.Lock()

    def __call__(self, *, prompt: str, user: str, task_id: str | None) -> Served:
        interaction_id = str(uuid.uuid4())
        with self._lock:
            self.calls.append(ChatCall(prompt, user, task_id, interaction_id))
            if self.fail_every and len(self.calls) % self.fail_every == 0:
                raise ChatFailed("429")
        return Served(interaction_id, self.model, self.answer(prompt))


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def base_policy(prompt: str) -> str:
    """The base corpus's answer, the same one each time a prompt is asked."""
    return sample_response(random.Random(prompt), parse_prompt(prompt))


def pleasing_edit(prompt: str) -> str:
    """A correct edit pleasing STRICT, to the prompt's file (a guess, so wrong, when ambiguous)."""
    parsed = parse_prompt(prompt)
    return render_edit(parsed.file or "utils.py", render_function(parsed.task, PLEASING))


def types(events: list[dict]) -> list[str]:
    return [event["type"] for event in events]
