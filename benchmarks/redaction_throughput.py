"""Redaction's cost on adversarial text against ordinary code: MB per CPU-second, and whether it
stays linear.

    .venv/bin/python benchmarks/redaction_throughput.py           # table
    .venv/bin/python benchmarks/redaction_throughput.py --json    # one JSON object

Every case is redacted in one call at two sizes, the second 8 times the first. `growth` is the
time per byte at the larger size over the time per byte at the smaller: 1.0 is linear, 8.0 would
be quadratic. The baseline is this repository's own Python source (ordinary code), measured in
the same run. The adversarial cases put many cues on one long line: what a tenant who wants to
make recording slow would send. CPU time, not wall time, and the fastest of three runs, so other
load skews it less.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tenants.redaction import redact  # noqa: E402

SMALL, LARGE = 64_000, 512_000


def _repeat(unit: Callable[[random.Random], str], size: int, sep: str = " ") -> str:
    rng, parts, length = random.Random(0), [], 0
    while length < size:
        part = unit(rng) + sep
        parts.append(part)
        length += len(part)
    return "".join(parts)[:size]


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _word(rng: random.Random, n: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz") -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _ordinary_code(size: int) -> str:
    sources = sorted(p for folder in ("tenants", "serving", "training") for p in (ROOT / folder).rglob("*.py"))
    text = "\n".join(p.read_text() for p in sources)
    return (text * (size // len(text) + 1))[:size]


TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
VENDOR_CUES = ("a3t accountkey= akc ap1 cloudantkey secret_key -us1 12345678:x .abcdef. t3blbkfj sg. sq0csp- k_live_ ghp_ "
               "glpat- xox _authtoken pypi- eyj :// bearer api_token curl ")
CASES: dict[str, Callable[[int], str]] = {
    "ordinary code (baseline)": _ordinary_code,
    "one line: password assignments": lambda n: _repeat(lambda r: f'db_password="{_word(r, 10, TOKEN_CHARS)}";', n),
    "one line: the word password": lambda n: _repeat(lambda r: "password", n),
    "one line: phone numbers": lambda n: _repeat(lambda r: f"+1 415 555 {_digits(r, 4)},", n),
    "one line: phone-like digit groups": lambda n: _repeat(lambda r: f"{_digits(r, 3)}-{_digits(r, 3)}-{_digits(r, 4)}", n),
    "one line: email addresses": lambda n: _repeat(lambda r: f"{_word(r, 5)}@{_word(r, 4)}.io", n),
    "one line: email addresses after a URL": lambda n: "https://" + _repeat(lambda r: f"{_word(r, 5)}@{_word(r, 4)}.io", n),
    "one line: IP addresses": lambda n: _repeat(lambda r: ".".join(str(r.randrange(11, 223)) for _ in range(4)), n),
    "one line: tokens": lambda n: _repeat(lambda r: "ghp_" + _word(r, 36, TOKEN_CHARS), n),
    "one line: token prefixes": lambda n: _repeat(lambda r: "ghp_ AKIA sk- xoxb-", n),
    "one line: redaction markers": lambda n: _repeat(lambda r: "[REDACTED:password]", n, sep=""),
    "many short lines: password assignments": lambda n: _repeat(lambda r: f"secret: {_word(r, 12, TOKEN_CHARS)}", n, sep="\n"),
    # Vendor-token regexes that once read the rest of a line from every start in it (docs/security.md)
    "one line: OpenAI key prefixes": lambda n: "t3blbkfj " + _repeat(lambda r: "sk-", n - 9, sep=""),
    "one line: JWT prefixes": lambda n: _repeat(lambda r: "eyJ", n, sep=""),
    "one line: npm registry URLs": lambda n: "_authtoken " + _repeat(lambda r: "a://", n - 11),
    "one line: curl commands": lambda n: _repeat(lambda r: "curl", n),
    "one line: Slack token prefixes": lambda n: _repeat(lambda r: "xoxb-1-", n, sep=""),
    "one line: a Cloudant key name and spaces": lambda n: "clkey" + " " * (n - 5),
    "one line: token assignments, long spaces": lambda n: _repeat(lambda r: "api_token" + " " * 200 + "x", n),
    # Every vendor regex's cue once, so that each reads the whole line, then the densest findings
    "one line: every vendor cue, IP addresses": lambda n: VENDOR_CUES + CASES["one line: IP addresses"](n - len(VENDOR_CUES)),
    # ... then punctuation: every position after a non-word character may open an assignment
    "one line: every vendor cue, punctuation": lambda n: VENDOR_CUES + (",;" * n)[: n - len(VENDOR_CUES)],
}


def _seconds(text: str) -> float:
    """The fastest of three runs: the one least disturbed by other load."""
    runs = []
    for _ in range(3):
        start = time.process_time()
        redact(text)
        runs.append(time.process_time() - start)
    return min(runs)


def measure(name: str) -> dict:
    small, large = CASES[name](SMALL), CASES[name](LARGE)
    t_small, t_large = _seconds(small), _seconds(large)
    findings = len(redact(small).findings)
    return {
        "case": name,
        "mb_per_s": round(len(large.encode()) / 1e6 / t_large, 2),
        "mb_per_s_small": round(len(small.encode()) / 1e6 / t_small, 2),
        "growth": round((t_large / len(large)) / (t_small / len(small)), 2),
        "findings_per_kb": round(findings / (len(small) / 1000), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [measure(name) for name in CASES]
    baseline = rows[0]["mb_per_s"]
    for row in rows:
        row["vs_baseline"] = round(row["mb_per_s"] / baseline, 2)
    worst = min(rows[1:], key=lambda row: row["mb_per_s"])
    if args.json:
        print(json.dumps({"sizes": [SMALL, LARGE], "cases": rows, "worst": worst["case"]}))
        return 0
    print(f"{'case':42} {'MB/s':>6} {'(64 KB)':>8} {'growth':>7} {'findings/KB':>12} {'vs code':>8}")
    for row in rows:
        print(f"{row['case']:42} {row['mb_per_s']:6.2f} {row['mb_per_s_small']:8.2f} {row['growth']:7.2f} "
              f"{row['findings_per_kb']:12.1f} {row['vs_baseline']:8.2f}")
    print(f"\nworst: {worst['case']}, {worst['mb_per_s']} MB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
