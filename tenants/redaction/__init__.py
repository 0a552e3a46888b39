"""Replace secrets and personal data in code-like text before it is stored.

Pure Python (no Django). ``redact(text)`` returns the text with every finding
replaced by ``[REDACTED:<kind>]`` plus the findings, as offsets into the
original text. Overlapping findings merge into one; the merged finding takes
the most sensitive kind (order of ``KINDS``).

What is detected
----------------
``private_key``
    PEM / OpenSSH / PGP / PuTTY private keys. detect-secrets' PrivateKeyDetector
    finds the ``BEGIN ... PRIVATE KEY`` header; we extend the span over the whole
    block (to the matching END line, or over the base64 body when it is cut off),
    because the header alone is not the secret.
``api_key``, ``token``
    Vendor credentials found by detect-secrets' regex detectors (AWS, Azure
    storage, Stripe, SendGrid, OpenAI, Mailchimp, Twilio, Square, IBM, SoftLayer,
    Cloudant, Artifactory; GitHub, GitLab, Slack, Discord, Telegram, npm, PyPI,
    JWT), plus a few formats detect-secrets 1.5 lacks (``secrets._VENDOR_PATTERNS``,
    ``secrets._CONTEXT_PATTERNS``: GitHub fine-grained PATs, Google/Anthropic/Hugging
    Face/OpenAI project keys, bare npm tokens, Stripe test keys, ``Bearer``/``Basic``
    credentials, ``*_token = <value>`` assignments).
``url_credentials``
    The password in ``scheme://user:password@host`` (detect-secrets BasicAuthDetector).
``password``
    Literal values assigned to secret-sounding names (``password``, ``secret``,
    ``api_key`` ...), using detect-secrets' KeywordDetector patterns for quoted
    values (code) and for unquoted ones (YAML, .env, INI), a few patterns for
    what they miss (``passwords._KEYWORD_SUPPLEMENT``: values starting with a symbol,
    ``DB_PASS``, XML elements, .netrc), and ``curl -u user:password``; then
    filtered: see ``passwords._is_secret_value``.
``email``, ``ip_address``
    Regex, addresses validated with the stdlib ``ipaddress``. Emails at
    documentation domains (``bob@corp.example``) are redacted too: tests and
    examples use them as stand-ins for real addresses, and over-redacting them
    costs nothing.
``phone``
    ``phonenumbers.PhoneNumberMatcher`` (default region ``pii.PHONE_REGION``).

What is not, and why
--------------------
* detect-secrets' high-entropy detectors (Base64/Hex): on code they fire on git
  hashes, lock-file digests, base64 data URIs and test fixtures; see
  ``benchmarks/redaction_recall.py --entropy`` for the measured rate.
* Its IPPublicDetector: replaced by our IPv4+IPv6 handling below.
* Placeholders and references are not secrets: ``None``, ``changeme``,
  ``<your-key>``, ``${VAR}``, ``{{ var }}``, ``os.environ[...]``, ``settings.X``,
  bare identifiers (``password = user_password``) and type names
  (``password: str``).
* Loopback, unspecified, link-local, multicast, reserved and documentation IP
  addresses (``127.0.0.1``, ``0.0.0.0``, ``::1``, ``192.0.2.x`` ...). A dotted quad
  right after a version cue (``v``, ``==``, ``>=``, ``version``, ``§``, ``RFC n``,
  ``ObjectIdentifier(`` ...) is a version, section or OID, and ``10.0.0.0/8`` is
  a network; a bare ``1.2.3.4`` *is* redacted, since it cannot be told apart from
  an address.
* Digit runs without separators (``4155552671`` is more often an id than a phone
  number in code), dates, timestamps, line numbers, hex hashes and UUIDs.
* Names, postal addresses, passwords in prose or in flags such as ``-pSECRET``,
  .netrc passwords without a digit, phone numbers written in a national format
  other than ``PHONE_REGION``'s.

Existing ``[REDACTED:<kind>]`` markers are left alone, and the result is
rescanned where a redaction may have exposed a neighbour, so ``redact`` is
idempotent (each finding reads there as one masked character, so a line dense
with findings costs its rescan only what is left of it). Nothing here touches detect-secrets' global settings or network
verification: we run the plugins' regexes (or exact linear-time stand-ins)
ourselves, never ``analyze_line`` (which reads global settings and may call ``verify()``,
i.e. the vendor's API). Speed: the costly regexes only run on lines holding a
cheap literal cue (see ``scan.Scan.lines_with``), once per line however many
cues it holds, and the costliest checks within a budget per byte of text
(``scan.CheckBudget``), so hostile text costs a bounded multiple of code's time
(benchmarks/redaction_throughput.py).

Layout: this module holds the entry points, the detectors' registry and the
merging of their findings; ``scan`` the state they share; ``private_keys``,
``secrets``, ``passwords`` and ``pii`` one detector each.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tenants.redaction import passwords, pii, private_keys, secrets
from tenants.redaction.scan import MASK, CheckBudget, Finding, Scan

__all__ = ["KINDS", "Finding", "Redacted", "redact", "redact_messages"]

# Most sensitive first: when findings overlap, the merged one keeps the first kind.
KINDS = (
    "private_key",
    "api_key",
    "token",
    "url_credentials",
    "password",
    "email",
    "phone",
    "ip_address",
)
_MAX_PASSES = 4  # rescans after the first; each only covers lines with new markers
# Each takes the scan and yields its findings, in any order: _merge sorts them.
_DETECTORS: tuple[Callable[[Scan], Iterator[Finding]], ...] = (
    private_keys.detect,
    secrets.detect,
    passwords.detect,
    pii.detect,
)


@dataclass(frozen=True)
class Redacted:
    text: str
    findings: tuple[Finding, ...]


def redact(text: str) -> Redacted:
    """Replace every secret and PII span in ``text`` by ``[REDACTED:<kind>]``."""
    budgets: dict[str, CheckBudget] = {}  # the costly checks some detectors may run, over every pass
    findings = _find(text, budgets)
    # Removing a secret can expose a neighbour glued to it ("jane@acme.com" +
    # "ghp_..." reads as one word until the token is gone), so rescan the result
    # until nothing new turns up: that is what makes redact() idempotent.
    for _ in range(_MAX_PASSES):
        if not findings:
            break
        # Each finding reads as one masked character here, not as its marker's 16-25: a line
        # dense with findings costs its rescan what is left of it, not half again its length.
        masked, segments = _render(text, findings, masked=True)
        exposed = [_to_original(f, segments) for f in _find_around_markers(masked, segments, budgets)]
        if not exposed:
            break
        findings = _merge(findings + exposed)
    return Redacted(_render(text, findings)[0], tuple(findings))


def redact_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Redact the ``content`` of OpenAI-style chat messages and the arguments of their tool
    calls (an agent passes file contents and commands there); other keys are kept as is."""
    redacted: list[dict[str, Any]] = []
    count = 0
    for message in messages:
        message = dict(message)
        if "content" in message:
            message["content"], found = _redact_content(message["content"])
            count += found
        if isinstance(message.get("tool_calls"), list):
            message["tool_calls"], found = _redact_tool_calls(message["tool_calls"])
            count += found
        redacted.append(message)
    return redacted, count


def _redact_tool_calls(tool_calls: list[Any]) -> tuple[list[Any], int]:
    calls, count = [], 0
    for call in tool_calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            result = redact(function["arguments"])
            call = {**call, "function": {**function, "arguments": result.text}}
            count += len(result.findings)
        calls.append(call)
    return calls, count


def _redact_content(content: Any) -> tuple[Any, int]:
    if isinstance(content, str):
        result = redact(content)
        return result.text, len(result.findings)
    if not isinstance(content, list):
        return content, 0  # None, or a shape we do not know: leave it untouched
    parts: list[Any] = []
    count = 0
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            result = redact(part["text"])
            parts.append({**part, "text": result.text})
            count += len(result.findings)
        else:
            parts.append(part)
    return parts, count


# --------------------------------------------------------------------------- #
# Merge and replace                                                            #
# --------------------------------------------------------------------------- #

_PRIORITY = {kind: rank for rank, kind in enumerate(KINDS)}


def _drop_marker_overlaps(findings: Iterable[Finding], scan: Scan) -> list[Finding]:
    return [f for f in findings if f.end > f.start and not scan.overlaps_marker(f.start, f.end)]


def _merge(findings: list[Finding]) -> list[Finding]:
    merged: list[Finding] = []
    for finding in sorted(findings, key=lambda f: (f.start, -f.end, _PRIORITY[f.kind])):
        if merged and finding.start < merged[-1].end:
            last = merged[-1]
            kind = min(last.kind, finding.kind, key=_PRIORITY.__getitem__)
            merged[-1] = Finding(kind, last.start, max(last.end, finding.end))
        else:
            merged.append(finding)
    return merged


def _find(text: str, budgets: dict[str, CheckBudget], masked: Iterable[tuple[int, int]] = ()) -> list[Finding]:
    scan = Scan(text, budgets, masked)
    found = (finding for detect in _DETECTORS for finding in detect(scan))
    return _merge(_drop_marker_overlaps(found, scan))


def _find_around_markers(masked: str, segments: list[_Segment], budgets: dict[str, CheckBudget]) -> list[Finding]:
    """Findings on the lines holding one of this pass's markers: all other lines are as they
    were scanned already, and every detector but the private-key one is line-local.

    ``masked`` is the text with each finding so far as one ``MASK`` character, at the ends of
    ``segments`` but the last. Those lines are scanned as one text (joined by line breaks, so
    nothing can match across them), then mapped back.
    """
    markers = [rendered_start + length for rendered_start, _, length in segments[:-1]]
    blocks = _marker_lines(masked, markers)
    joined_starts: list[int] = []
    pieces: list[str] = []
    cursor = 0
    for start, end in blocks:
        joined_starts.append(cursor)
        pieces.append(masked[start:end])
        cursor += end - start + 1
    joined_markers = []
    for marker in markers:
        i = bisect.bisect_right(blocks, (marker, math.inf)) - 1  # the block holding it
        start = marker - blocks[i][0] + joined_starts[i]
        joined_markers.append((start, start + 1))
    found: list[Finding] = []
    for finding in _find("\n".join(pieces), budgets, joined_markers):
        i = bisect.bisect_right(joined_starts, finding.start) - 1
        block_start, block_end = blocks[i]
        shift = block_start - joined_starts[i]
        if finding.end + shift <= block_end:  # a key block cannot span two of them
            found.append(Finding(finding.kind, finding.start + shift, finding.end + shift))
    return found


def _marker_lines(text: str, markers: list[int]) -> list[tuple[int, int]]:
    """Spans of the lines holding a marker (their positions, sorted), adjacent lines joined."""
    spans: list[tuple[int, int]] = []
    for marker in markers:
        if spans and marker < spans[-1][1]:
            continue  # on a line already taken: looking for its ends again would make a long line quadratic
        start = text.rfind("\n", 0, marker) + 1
        end = text.find("\n", marker + 1)
        end = len(text) if end == -1 else end
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


# A stretch of original text inside the rendered one: (rendered start, original start, length).
_Segment = tuple[int, int, int]


def _render(text: str, findings: list[Finding], *, masked: bool = False) -> tuple[str, list[_Segment]]:
    """The text with each finding replaced by its marker, or by one MASK character (``masked``:
    what a rescan reads)."""
    pieces: list[str] = []
    segments: list[_Segment] = []
    cursor = rendered = 0
    for finding in findings:
        segments.append((rendered, cursor, finding.start - cursor))
        marker_text = MASK if masked else f"[REDACTED:{finding.kind}]"
        pieces += [text[cursor : finding.start], marker_text]
        rendered += finding.start - cursor + len(marker_text)
        cursor = finding.end
    segments.append((rendered, cursor, len(text) - cursor))
    pieces.append(text[cursor:])
    return "".join(pieces), segments


def _to_original(finding: Finding, segments: list[_Segment]) -> Finding:
    # Findings never overlap a marker (_drop_marker_overlaps), so each lies
    # inside one segment of original text.
    i = bisect.bisect_right(segments, (finding.start, math.inf)) - 1  # last segment starting <= start
    rendered_start, original_start, length = segments[i]
    assert finding.end <= rendered_start + length, "a finding straddles a marker"
    shift = original_start - rendered_start
    return Finding(finding.kind, finding.start + shift, finding.end + shift)
