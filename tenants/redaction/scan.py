"""The scan state every detector reads, and the one type they all yield.

``Scan`` holds the text with existing ``[REDACTED:<kind>]`` markers masked, its
ASCII-lowered copy for cheap gates, and a line index; ``Finding`` is a kind and
a span of the original text. Detector modules import only from here, so none
of them depends on another's scan or on the package's entry points.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int  # offsets into the original text
    end: int


MARKER_RE = re.compile(r"\[REDACTED:[a-z_]+\]")
# What a marker reads as to the detectors. NUL is neither a word character nor whitespace, so no
# detector reads a keyword out of "[REDACTED:password]" or runs a token through a marker.
MASK = "\0"


# ASCII-only lowering keeps offsets (str.lower() may change the length of
# non-ASCII text) and lets gates run without re.IGNORECASE, which is ~10x slower.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class CheckBudget:
    """How many more costly checks (a phone-number parse, a password's filters) one detector
    may run: one per `bytes_per_check` bytes of text, beyond a first `free` ones. Past that,
    the detector redacts candidates on their cheap shape alone. Text that dense with cues is a
    dump or an attack; erring towards redaction keeps it safe while the cost per byte stays
    bounded (docs/figures.md)."""

    def __init__(self, text_length: int, *, bytes_per_check: int, free: int) -> None:
        self.left = max(free, text_length // bytes_per_check)

    def spend(self) -> bool:
        """Whether a check may run; False once they are spent."""
        self.left -= 1
        return self.left >= 0


class Scan:
    """One text as the detectors read it: existing markers masked (same length, so offsets
    hold), and ``masked`` spans, markers a rescan put in as MASK already."""

    def __init__(self, text: str, budgets: dict[str, CheckBudget] | None = None, masked: Iterable[tuple[int, int]] = ()) -> None:
        self._markers = sorted([m.span() for m in MARKER_RE.finditer(text)] + list(masked))  # disjoint
        self._marker_ends = [end for _, end in self._markers]
        self.text = _masked(text, self._markers)
        self.lower = self.text.translate(_ASCII_LOWER)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        self._budgets = {} if budgets is None else budgets

    def budget(self, *, bytes_per_check: int, free: int) -> CheckBudget:
        """A fresh budget of costly checks for one detector on this text."""
        return CheckBudget(len(self.text), bytes_per_check=bytes_per_check, free=free)

    def shared_budget(self, detector: str, *, bytes_per_check: int, free: int) -> CheckBudget:
        """The detector's budget over the scans given the same ``budgets`` (the rescans of one
        text), sized by the first: for a detector whose cheap shape past it finds all that the
        costly check would, so that a rescan need not check again."""
        if detector not in self._budgets:
            self._budgets[detector] = self.budget(bytes_per_check=bytes_per_check, free=free)
        return self._budgets[detector]

    def in_marker(self, pos: int) -> bool:
        """Whether ``pos`` lies in a marker of an earlier pass (redacted already)."""
        return self.overlaps_marker(pos, pos + 1)

    def overlaps_marker(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self._marker_ends, start)  # the first marker ending after start
        return i < len(self._markers) and self._markers[i][0] < end

    def line_at(self, pos: int) -> tuple[int, str]:
        """The line holding ``pos`` (without its line break) and its start offset."""
        start, end = self.line_bounds(pos)
        return start, self.text[start:end]

    def line_bounds(self, pos: int) -> tuple[int, int]:
        """Where the line holding ``pos`` starts and ends (before its line break), without
        copying it: a long line with many cues must cost its length once, not once per cue."""
        i = bisect.bisect_right(self._line_starts, pos) - 1
        start = self._line_starts[i]
        end = self._line_starts[i + 1] - 1 if i + 1 < len(self._line_starts) else len(self.text)
        if end > start and self.text[end - 1] == "\r":
            end -= 1
        return start, end

    def lines_with(self, gate: re.Pattern[str]) -> Iterator[tuple[int, str]]:
        """Lines whose lowered text holds the gate's cue, with their start offsets.

        Gates are cheap lowercase cues without which a costly regex cannot match;
        the costly regex then runs on those lines only, once per line.
        """
        pos = 0
        while cue := gate.search(self.lower, pos):
            start, end = self.line_bounds(cue.start())
            yield start, self.text[start:end]
            pos = end + 1  # the next cue on a later line


def _masked(text: str, markers: list[tuple[int, int]]) -> str:
    pieces, cursor = [], 0
    for start, end in markers:
        pieces += [text[cursor:start], MASK * (end - start)]
        cursor = end
    return "".join(pieces) + text[cursor:]
