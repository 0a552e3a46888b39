"""A per-process cache of small per-organization facts read on every request (its route,
its limits): at most `ttl_s` old, dropped at once by `forget` in the process that changed
them. Other processes see a change within `ttl_s`. None, a lookup that found nothing, is
never remembered."""

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class TtlCache(Generic[V]):
    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self.ttl_s, self.clock = ttl_s, clock
        self._entries: dict[Hashable, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        now = self.clock()
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and entry[0] > now:
            return entry[1]
        value = compute()  # outside the lock: two threads may both compute, and both are right
        if value is not None:  # a miss stays a miss: unknown keys cannot fill the cache
            with self._lock:
                self._entries[key] = (now + self.ttl_s, value)
        return value

    def put(self, key: Hashable, value: V) -> None:
        """Remember `value` for `ttl_s` from now."""
        with self._lock:
            self._entries[key] = (self.clock() + self.ttl_s, value)

    def peek(self, key: Hashable) -> V | None:
        """The value if it is fresh, else None; never computes (safe on an event loop)."""
        with self._lock:
            entry = self._entries.get(key)
        return entry[1] if entry is not None and entry[0] > self.clock() else None

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)
