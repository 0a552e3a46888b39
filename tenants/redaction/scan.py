"""The scan state every detector reads, and the one type they all yield.

``Scan`` holds the text with existing ``[REDACTED:<kind>]`` markers masked, its
ASCII-lowered copy for cheap gates, and a line index; ``Finding`` is a kind and
a span of the original text. Detector modules import only from here, so none
of them depends on another's scan or on the package's entry points.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int  # offsets into the original text
    end: int


MARKER_RE = re.compile(r"\[REDACTED:[a-z_]+\]")


def mask_markers(text: str) -> str:
    # Same length, so offsets hold; NUL is neither a word char nor whitespace, so
    # no detector can read a keyword out of "[REDACTED:password]" on a second pass.
    return MARKER_RE.sub(lambda m: "\0" * len(m.group()), text)


# ASCII-only lowering keeps offsets (str.lower() may change the length of
# non-ASCII text) and lets gates run without re.IGNORECASE, which is ~10x slower.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class Scan:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lower = text.translate(_ASCII_LOWER)
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_at(self, pos: int) -> tuple[int, str]:
        """The line holding ``pos`` (without its line break) and its start offset."""
        i = bisect.bisect_right(self._line_starts, pos) - 1
        start = self._line_starts[i]
        end = self._line_starts[i + 1] - 1 if i + 1 < len(self._line_starts) else len(self.text)
        return start, self.text[start:end].rstrip("\r")

    def lines_with(self, gate: re.Pattern[str]) -> Iterator[tuple[int, str]]:
        """Lines whose lowered text holds the gate's cue, with their start offsets.

        Gates are cheap lowercase cues without which a costly regex cannot match;
        the costly regex then runs on those lines only.
        """
        last = -1
        for cue in gate.finditer(self.lower):
            line_start, line = self.line_at(cue.start())
            if line_start != last:
                last = line_start
                yield line_start, line
