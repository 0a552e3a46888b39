"""One organization's feedback on its way to the platform.

Users react at once (accepted, rejected, invalid) or hours later (persisted, reverted, a
follow-up, a task's outcome). The outbox holds each event until its time comes, the delay
multiplied by a time scale so that simulated hours pass in seconds, then sends what is due
through POST /api/v1/feedback in batches, or POST /api/v1/tasks/<id>/outcome for an outcome.

Delivery is at least once and storage exactly once: a batch that fails with a server or
network error is sent again, byte for byte, and the idempotency keys (one per interaction and
event type) make the platform store each event once. A batch the platform refuses (4xx) is
counted as failed, never retried: sending it again would be refused again.
"""

import heapq
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from demo.traffic.transports import (
    DEFAULT_RETRY,
    Poster,
    Retry,
    Undelivered,
    post_with_retries,
)

MAX_BATCH = 1000  # the platform's default limit per feedback batch
# How long the sender waits, once something is due, for events of responses served meanwhile
# to join the same batch: one request for many events instead of one for each.
LINGER_S = 0.1


@dataclass(frozen=True)
class Feedback:
    interaction_id: str
    type: str  # an event type of SPEC 5 other than task_outcome

    def body(self, occurred_at: str) -> dict:
        return {
            "interaction_id": self.interaction_id,
            "type": self.type,
            "idempotency_key": idempotency_key(self.interaction_id, self.type),
            "occurred_at": occurred_at,
        }


@dataclass(frozen=True)
class Outcome:
    task_id: str
    value: float  # 0 to 1

    def body(self) -> dict:
        return {"value": self.value, "idempotency_key": idempotency_key(self.task_id, "task_outcome")}


@dataclass
class Delivery:
    """What became of the events; read it after `drain`."""

    sent: Counter[str] = field(default_factory=Counter)  # stored by the platform, by event type
    failed: Counter[str] = field(default_factory=Counter)  # not stored, by "<endpoint> <status>"
    outcomes: list[float] = field(default_factory=list)  # the task outcomes stored


def idempotency_key(subject_id: str, event_type: str) -> str:
    """The same for every delivery of one event, so a replay is stored once. A user gives at most
    one event of each type about an interaction (or a task), so the pair names the event."""
    return f"{subject_id}:{event_type}"


class Outbox:
    """Events scheduled for later and a thread that sends them when due (see the module doc).

    `schedule` may be called from any thread; one thread sends, the outbox's own after `start`
    (tests may instead call `send_due` themselves, without starting it).
    """

    def __init__(
        self, api: Poster, *, time_scale: float, retry: Retry = DEFAULT_RETRY, max_batch: int = MAX_BATCH,
        linger_s: float = LINGER_S, clock: Callable[[], float] = time.monotonic,
    ):
        if time_scale < 0:
            raise ValueError(f"time_scale must be >= 0, not {time_scale}")
        self.delivery = Delivery()
        self._api, self._time_scale, self._retry, self._max_batch = api, time_scale, retry, max_batch
        self._linger_s, self._clock = linger_s, clock
        self._due: list[tuple[float, int, Feedback | Outcome]] = []  # a heap, earliest first
        self._order = itertools.count()  # keeps events due at the same moment in scheduling order
        self._changed = threading.Condition()
        self._draining = self._flushing = False
        self._thread: threading.Thread | None = None
        self._crash: BaseException | None = None

    @property
    def pending(self) -> int:
        with self._changed:
            return len(self._due)

    def schedule(self, item: Feedback | Outcome, *, delay_s: float) -> None:
        """Send `item` `delay_s` simulated seconds from now."""
        with self._changed:
            if self._draining:
                raise RuntimeError("the outbox is draining: nothing more can be scheduled")
            due = self._clock() + delay_s * self._time_scale
            heapq.heappush(self._due, (due, next(self._order), item))
            self._changed.notify()

    def start(self) -> "Outbox":
        # A daemon, so an interrupted run can still exit while a request hangs.
        self._thread = threading.Thread(target=self._run, name="traffic-outbox", daemon=True)
        self._thread.start()
        return self

    def drain(self, *, wait: bool) -> None:
        """Send everything still scheduled and stop: each event at its time, or all at once now
        when not `wait`. Returns when nothing is left; without `start`, sends from this thread."""
        with self._changed:
            self._draining, self._flushing = True, self._flushing or not wait
            self._changed.notify()
        if self._thread is None:
            self._send_until_drained()
            return
        self._thread.join()
        if self._crash is not None:
            raise RuntimeError(f"the outbox stopped with {self.pending} events unsent") from self._crash

    def send_due(self) -> None:
        """Send what is due (everything once flushing), in the order it fell due."""
        feedback, outcomes = self._take_due()
        occurred_at = datetime.now(UTC).isoformat()
        for start in range(0, len(feedback), self._max_batch):
            self._send_feedback(feedback[start:start + self._max_batch], occurred_at)
        for outcome in outcomes:
            self._send_outcome(outcome)

    def _run(self) -> None:
        try:
            self._send_until_drained()
        except BaseException as error:
            self._crash = error  # for `drain` to raise: a sender that died must not look finished
            raise

    def _send_until_drained(self) -> None:
        while True:
            with self._changed:
                while not self._anything_due():
                    if self._draining and not self._due:
                        return
                    self._changed.wait(timeout=self._due[0][0] - self._clock() if self._due else None)
            time.sleep(self._linger_s)
            self.send_due()

    def _anything_due(self) -> bool:
        return bool(self._due) and (self._flushing or self._due[0][0] <= self._clock())

    def _take_due(self) -> tuple[list[Feedback], list[Outcome]]:
        feedback, outcomes = [], []
        with self._changed:
            while self._anything_due():
                item = heapq.heappop(self._due)[2]
                (outcomes if isinstance(item, Outcome) else feedback).append(item)
        return feedback, outcomes

    def _send_feedback(self, batch: list[Feedback], occurred_at: str) -> None:
        # The body is built once, so every retry sends the very same events.
        body = {"events": [item.body(occurred_at) for item in batch]}
        try:
            post_with_retries(self._api, "/api/v1/feedback", body, retry=self._retry)
        except Undelivered as failure:
            self.delivery.failed[f"feedback {failure.status}"] += len(batch)
            return
        self.delivery.sent.update(item.type for item in batch)

    def _send_outcome(self, outcome: Outcome) -> None:
        try:
            post_with_retries(self._api, f"/api/v1/tasks/{outcome.task_id}/outcome", outcome.body(), retry=self._retry)
        except Undelivered as failure:
            self.delivery.failed[f"outcome {failure.status}"] += 1
            return
        self.delivery.sent["task_outcome"] += 1
        self.delivery.outcomes.append(outcome.value)
