"""Where a completion's time went, for its `Server-Timing` header (W3C Server Timing): so that a
client, or a benchmark, can tell the gateway's own wait (admission, its turn at the model
servers) from the model's time without access to the platform's logs.

The phases say no more than the total latency already does: how long this request waited, not
who else was served.
"""

import time


class ServerTiming:
    def __init__(self, started: float):
        self._last = started
        self._spent: dict[str, float] = {}  # phase -> milliseconds, in the order they ran

    def mark(self, phase: str) -> None:
        """The time since the last mark (or the start) was spent in `phase`."""
        now = time.perf_counter()
        self._spent[phase] = self._spent.get(phase, 0.0) + (now - self._last) * 1000.0
        self._last = now

    def header(self) -> dict[str, str]:
        return {"Server-Timing": ", ".join(f"{phase};dur={ms:.1f}" for phase, ms in self._spent.items())}


def server_timing_parse(header: str) -> dict[str, float]:
    """A Server-Timing header as written above: milliseconds per phase (for clients and benchmarks)."""
    return {name.strip(): float(ms) for name, _, ms in (entry.partition(";dur=") for entry in header.split(","))}
