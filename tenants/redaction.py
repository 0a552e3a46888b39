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
    JWT), plus a few formats detect-secrets 1.5 lacks (``_VENDOR_PATTERNS``,
    ``_CONTEXT_PATTERNS``: GitHub fine-grained PATs, Google/Anthropic/Hugging
    Face/OpenAI project keys, bare npm tokens, Stripe test keys, ``Bearer``/``Basic``
    credentials, ``*_token = <value>`` assignments).
``url_credentials``
    The password in ``scheme://user:password@host`` (detect-secrets BasicAuthDetector).
``password``
    Literal values assigned to secret-sounding names (``password``, ``secret``,
    ``api_key`` ...), using detect-secrets' KeywordDetector patterns for quoted
    values (code) and for unquoted ones (YAML, .env, INI), a few patterns for
    what they miss (``_KEYWORD_SUPPLEMENT``: values starting with a symbol,
    ``DB_PASS``, XML elements, .netrc), and ``curl -u user:password``; then
    filtered: see ``_is_secret_value``.
``email``, ``ip_address``
    Regex, addresses validated with the stdlib ``ipaddress``. Emails at
    documentation domains (``bob@corp.example``) are redacted too: tests and
    examples use them as stand-ins for real addresses, and over-redacting them
    costs nothing.
``phone``
    ``phonenumbers.PhoneNumberMatcher`` (default region ``PHONE_REGION``).

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
idempotent. Nothing here touches detect-secrets' global settings or network
verification: we call the plugins' regexes and ``analyze_string`` directly,
never ``analyze_line`` (which reads global settings and may call ``verify()``,
i.e. the vendor's API). Speed (~1 MB/s on code): the costly regexes only run on
lines holding a cheap literal cue (see ``_Scan.lines_with``).
"""

from __future__ import annotations

import bisect
import ipaddress
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import phonenumbers
from detect_secrets.filters import heuristic
from detect_secrets.plugins import keyword
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

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
PHONE_REGION = "US"  # region for numbers written without a +country code
_MAX_PASSES = 4  # rescans after the first; each only covers lines with new markers


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int  # offsets into the original text
    end: int


@dataclass(frozen=True)
class Redacted:
    text: str
    findings: tuple[Finding, ...]


def redact(text: str) -> Redacted:
    """Replace every secret and PII span in ``text`` by ``[REDACTED:<kind>]``."""
    findings = _find(text)
    # Removing a secret can expose a neighbour glued to it ("jane@acme.com" +
    # "ghp_..." reads as one word until the token is gone), so rescan the result
    # until nothing new turns up: that is what makes redact() idempotent.
    for _ in range(_MAX_PASSES):
        if not findings:
            break
        rendered, segments = _render(text, findings)
        exposed = [_to_original(f, segments) for f in _find_around_markers(rendered)]
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
# Scan state: the text (markers masked) and a line index, shared by detectors. #
# --------------------------------------------------------------------------- #

_MARKER_RE = re.compile(r"\[REDACTED:[a-z_]+\]")


def _mask_markers(text: str) -> str:
    # Same length, so offsets hold; NUL is neither a word char nor whitespace, so
    # no detector can read a keyword out of "[REDACTED:password]" on a second pass.
    return _MARKER_RE.sub(lambda m: "\0" * len(m.group()), text)


# ASCII-only lowering keeps offsets (str.lower() may change the length of
# non-ASCII text) and lets gates run without re.IGNORECASE, which is ~10x slower.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class _Scan:
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


def _at_word_start(text: str, pos: int) -> bool:
    return pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] == "_")


def _detect(scan: _Scan) -> Iterator[Finding]:
    yield from _private_keys(scan)
    yield from _plugin_secrets(scan)
    yield from _extra_secrets(scan)
    yield from _keyword_passwords(scan)
    yield from _emails(scan)
    yield from _ip_addresses(scan)
    yield from _phones(scan)


# --------------------------------------------------------------------------- #
# Secrets from detect-secrets plugins                                          #
# --------------------------------------------------------------------------- #

_PLUGIN_KINDS: tuple[tuple[RegexBasedDetector, str], ...] = (
    (AWSKeyDetector(), "api_key"),
    (AzureStorageKeyDetector(), "api_key"),
    (ArtifactoryDetector(), "api_key"),
    (CloudantDetector(), "api_key"),
    (IbmCloudIamDetector(), "api_key"),
    (IbmCosHmacDetector(), "api_key"),
    (MailchimpDetector(), "api_key"),
    (OpenAIDetector(), "api_key"),
    (SendGridDetector(), "api_key"),
    (SoftlayerDetector(), "api_key"),
    (SquareOAuthDetector(), "api_key"),
    (StripeDetector(), "api_key"),
    (TwilioKeyDetector(), "api_key"),
    (GitHubTokenDetector(), "token"),
    (GitLabTokenDetector(), "token"),
    (SlackDetector(), "token"),
    (DiscordBotTokenDetector(), "token"),
    (TelegramBotTokenDetector(), "token"),
    (NpmDetector(), "token"),
    (PypiTokenDetector(), "token"),
    (JwtTokenDetector(), "token"),
    (BasicAuthDetector(), "url_credentials"),
)
# Characters a token may continue with past what a plugin's regex reported:
# some plugins report a prefix only (GitHub's regex captures just "ghp"; JWT's
# ends in a lazy quantifier and drops the signature).
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-]*")
_EDGE_NOISE = " \t\"'`=:"


# Gates (see _Scan.lines_with), one per plugin. Most detect-secrets regexes open
# with a lookbehind, a character class or re.IGNORECASE, all of which defeat the
# re module's fast literal search (the IBM/Cloudant/SoftLayer assignment regexes
# cost ~50 us a line); a gate opens with a literal.
_PLUGIN_GATES: dict[type[RegexBasedDetector], re.Pattern[str]] = {
    AWSKeyDetector: re.compile(r"a3t|abia|acca|akia|asia|aws"),
    AzureStorageKeyDetector: re.compile(r"accountkey="),
    ArtifactoryDetector: re.compile(r"akc|ap[\da-f]"),
    CloudantDetector: re.compile(r"cl(?:oudant|ou)?[_-]?(?:api)?(?:key|pw|pass|token)|cloudant\.com"),
    IbmCloudIamDetector: re.compile(r"(?:key|pwd|pass|token)[\"'\]]?[ =:>]+[\"']?[\w-]{44}"),
    IbmCosHmacDetector: re.compile(r"secret[-_]?(?:access)?[-_]?key"),
    SoftlayerDetector: re.compile(r"(?:softlayer|sl)[_-]?(?:api)?(?:key|pw|pass|token)|softlayer\.com"),
    MailchimpDetector: re.compile(r"-us\d"),
    TwilioKeyDetector: re.compile(r"(?:ac|sk)[a-z0-9]{32}"),
    # A literal first, then a look back/ahead: still a fast literal scan.
    TelegramBotTokenDetector: re.compile(r":(?<=\d{8}:)"),
    DiscordBotTokenDetector: re.compile(r"\.(?=[a-z0-9_-]{6}\.)"),
    OpenAIDetector: re.compile(r"t3blbkfj"),
    SendGridDetector: re.compile(r"sg\."),
    SquareOAuthDetector: re.compile(r"sq0csp-"),
    StripeDetector: re.compile(r"k_live_"),
    GitHubTokenDetector: re.compile(r"gh[pousr]_"),
    GitLabTokenDetector: re.compile(r"gl[a-z]+-|gr1348941"),
    SlackDetector: re.compile(r"xox|hooks\.slack"),
    NpmDetector: re.compile(r"_authtoken"),
    PypiTokenDetector: re.compile(r"pypi-"),
    JwtTokenDetector: re.compile(r"eyj"),
    BasicAuthDetector: re.compile(r"://"),
}


_ANY_PLUGIN_GATE = re.compile("|".join(gate.pattern for gate in _PLUGIN_GATES.values()))


def _plugin_secrets(scan: _Scan) -> Iterator[Finding]:
    # Plugins are line-based and report values, not positions: we rerun their own
    # regexes for positions, and keep a match only when the plugin's
    # analyze_string() reports that value for the line (JWT, for one, filters its
    # regex matches there).
    if not _ANY_PLUGIN_GATE.search(scan.lower):
        return  # most short texts: one scan instead of one per plugin
    for plugin, kind in _PLUGIN_KINDS:
        for line_start, line in scan.lines_with(_PLUGIN_GATES[type(plugin)]):
            reported: frozenset[str] | None = None
            for regex in plugin.denylist:
                for match in regex.finditer(line):
                    for value, start, end in _findall_items(match):
                        if reported is None:
                            reported = frozenset(plugin.analyze_string(line))
                        if value in reported and _is_plausible(plugin, match, value):
                            yield _token_finding(scan.text, kind, line_start + start, line_start + end)


def _is_plausible(plugin: RegexBasedDetector, match: re.Match[str], value: str) -> bool:
    """Drop templates ({password}), filler (ACxxxxxxxx...) and demo URL credentials."""
    if heuristic.is_templated_secret(value) or _is_filler(value):
        return False
    if not isinstance(plugin, BasicAuthDetector):
        return True
    # user:PASSWORD@, user:pass@, postgres:postgres@ are documentation, not credentials.
    user = match.group()[3 : match.start(1) - match.start() - 1]  # the match is "://user:pw@"
    return value != user and not _PLACEHOLDER.fullmatch(value) and not _CAPS_NAME.fullmatch(value)


def _is_filler(value: str) -> bool:
    return max(map(value.count, set(value))) * 2 > len(value)


_CAPS_NAME = re.compile(r"[A-Z][A-Z_]*")


def _findall_items(match: re.Match[str]) -> Iterator[tuple[str, int, int]]:
    """What ``re.findall`` would report for this match (as analyze_string sees it), with spans."""
    if not match.re.groups:
        yield match.group(), match.start(), match.end()
        return
    for group in range(1, match.re.groups + 1):
        value = match.group(group)
        if value:
            yield value, match.start(group), match.end(group)


def _token_finding(text: str, kind: str, start: int, end: int) -> Finding:
    while start < end and text[start] in _EDGE_NOISE:
        start += 1
    while end > start and text[end - 1] in _EDGE_NOISE:
        end -= 1
    tail = _TOKEN_TAIL.match(text, end)
    return Finding(kind, start, tail.end() if tail else end)


# Formats detect-secrets 1.5 does not know, each a fixed vendor prefix (checked
# to start a word). Group 1 is the secret.
_VENDOR_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(github_pat_[A-Za-z0-9_]{22,})"), "token"),
    (re.compile(r"(hf_[A-Za-z0-9]{30,})(?!\w)"), "token"),
    (re.compile(r"(npm_[A-Za-z0-9]{36})(?!\w)"), "token"),  # outside .npmrc too
    (re.compile(r"(AIza[0-9A-Za-z_\-]{35})"), "api_key"),
    (re.compile(r"(sk-ant-[a-z]+\d*-[A-Za-z0-9_\-]{40,})"), "api_key"),
    (re.compile(r"([sr]k_test_[0-9a-zA-Z]{24,})"), "api_key"),
    # OpenAI project/service keys contain "-" and "_", which detect-secrets'
    # regex does not allow next to its T3BlbkFJ marker.
    (re.compile(r"(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,})"), "api_key"),
)
# Credential contexts: (regex, lowercase gate, kind, value check). They also hold
# references ("Bearer self.token", "curl -u $USER:$PASS"), hence the checks.
# Each runs only on lines holding its gate.
_CONTEXT_PATTERNS: tuple[tuple[re.Pattern[str], re.Pattern[str], str, Callable[[str], bool]], ...] = (
    (
        re.compile(r"(?<![\w-])(?:Bearer|Basic)\s+([A-Za-z0-9\-._~+/]{16,}=*)", re.IGNORECASE),
        re.compile(r"bearer|basic"),
        "token",
        lambda value: _looks_generated(value),
    ),
    (
        RegexBasedDetector.build_assignment_regex(
            prefix_regex=r"(?:access|auth|api|bearer|refresh|session|bot|app|personal|client|secret|ci)",
            secret_keyword_regex=r"token",
            secret_regex=r"([A-Za-z0-9_\-.~+/=]{16,})",
        ),
        re.compile(r"token"),
        "token",
        lambda value: _looks_generated(value),
    ),
    (  # curl -u user:password, wget --user ... (the password after the first colon)
        re.compile(r"\b(?:curl|wget)\b[^\n]*?\s(?:-u|--user)[\s=]+[\"']?[^\s:\"']+:([^\s\"']+)"),
        re.compile(r"curl|wget"),
        "password",
        lambda value: _is_literal_value(value, quoted=False),
    ),
)
# settings.DB_PASSWORD, ed25519.Ed25519PrivateKey: an attribute path opens with a
# plain name (digits only at its end), unlike a secret that happens to hold a dot.
_DOTTED_NAME = re.compile(r"[A-Za-z_]+\d*(?:\.[A-Za-z_]\w*)+")


def _extra_secrets(scan: _Scan) -> Iterator[Finding]:
    for regex, kind in _VENDOR_PATTERNS:
        for match in regex.finditer(scan.text):
            if _at_word_start(scan.text, match.start(1)):
                yield Finding(kind, match.start(1), match.end(1))
    for regex, gate, kind, check in _CONTEXT_PATTERNS:
        for line_start, line in scan.lines_with(gate):
            for match in regex.finditer(line):
                if check(match.group(1)):
                    yield Finding(kind, line_start + match.start(1), line_start + match.end(1))


def _looks_generated(value: str) -> bool:
    """Machine-made credentials mix letters and digits; names and attribute paths do not."""
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha and not _DOTTED_NAME.fullmatch(value)


# --------------------------------------------------------------------------- #
# Private key blocks                                                           #
# --------------------------------------------------------------------------- #

_KEY_HEADERS = (*PrivateKeyDetector.denylist, re.compile(r"BEGIN ENCRYPTED PRIVATE KEY"))
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PUTTY_END = re.compile(r"Private-MAC: *[0-9a-fA-F]+")
# Body of a key cut off before its END line: base64, line breaks (also escaped
# ones, as in a JSON string) and PEM headers.
_KEY_BODY = re.compile(r"(?:[A-Za-z0-9+/=\s]|\\[nr]|(?:Proc-Type|DEK-Info|Comment):[^\n]*)*")
_MAX_KEY_CHARS = 20_000


_MIN_KEY_BODY = 32  # base64 characters; a bare header is a constant, not a key


def _private_keys(scan: _Scan) -> Iterator[Finding]:
    text = scan.text
    for regex in _KEY_HEADERS:
        for match in regex.finditer(text):
            start = match.start()
            dashes = text.rfind("-----", max(0, start - 5), start)
            start = dashes if dashes != -1 else start
            end = _key_end(text, match)
            if len(_BASE64_CHARS.findall(text, match.end(), end)) >= _MIN_KEY_BODY:
                yield Finding("private_key", start, end)


_BASE64_CHARS = re.compile(r"[A-Za-z0-9+/=]")


def _key_end(text: str, header: re.Match[str]) -> int:
    end_re = _PUTTY_END if header.group().startswith("PuTTY") else _PEM_END
    found = end_re.search(text, header.end(), header.end() + _MAX_KEY_CHARS)
    if found:
        return found.end()
    body_start = text.find("-----", header.end(), header.end() + 40)
    body_start = body_start + 5 if body_start != -1 else header.end()
    body = _KEY_BODY.match(text, body_start)
    end = body.end() if body else body_start
    while end > body_start and text[end - 1].isspace():
        end -= 1
    return end


# --------------------------------------------------------------------------- #
# Passwords: detect-secrets KeywordDetector patterns, then our value filters   #
# --------------------------------------------------------------------------- #

_KEYWORD_PATTERNS: dict[re.Pattern[str], int] = {
    **keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,  # code: password = "..."
    **keyword.CONFIG_DENYLIST_REGEX_TO_GROUP,  # YAML/.env/INI: password: ...
    **keyword.GOLANG_DENYLIST_REGEX_TO_GROUP,  # password := "..."
    **keyword.COMMON_C_DENYLIST_REGEX_TO_GROUP,  # char password[] = "..."
    **keyword.C_PLUS_PLUS_REGEX_TO_GROUP,  # std::string secret("...")
}
# Gaps in those patterns, filled here: values that start with a symbol (they
# require a word character first, but generated passwords often start with one),
# hyphenated names (--db-password=) and "*_pass" names (DB_PASS, admin-pass),
# Python annotated defaults (def connect(password: str = "hunter2")), XML
# elements (<password>x</password>) and .netrc lines (password x).
_KEYWORDS = r"(?:%s|(?<=[a-z0-9][_-])pass\b)" % "|".join(keyword.DENYLIST)
_ASSIGN = r"[\w-]*[\"'\]]{0,2}\s*(?::=|=>|[:=])\s*"
_KEYWORD_SUPPLEMENT: dict[re.Pattern[str], int] = {
    re.compile(_KEYWORDS + _ASSIGN + r"""@?(["'`])([^"'`\n]+)\1""", re.IGNORECASE): 2,
    re.compile(_KEYWORDS + _ASSIGN + r"""([^\s"'`]+)""", re.IGNORECASE): 1,
    re.compile(_KEYWORDS + r"""\w*\s*:\s*[\w\[\]., |]+?=\s*(["'])([^"'\n]+)\1""", re.IGNORECASE): 2,
}
_XML_ELEMENT = re.compile(r"<(?:%s)[\w-]*>([^<\n]+)</" % _KEYWORDS, re.IGNORECASE)
# .netrc: "password x" alone on its line or after "login <user>"; the value must
# hold a digit, or any line of prose ending in "password <word>" would match.
_NETRC = re.compile(r"""(?:^[ \t]*|\blogin\s+\S+\s+)(?:password|passwd)[ \t]+(?=\S*\d)([^\s"'`=:]\S*)\s*$""")
_KEYWORD_GROUPS = {**_KEYWORD_PATTERNS, **_KEYWORD_SUPPLEMENT, _XML_ELEMENT: 1, _NETRC: 1}
# All but these open with the keyword, so on a line the others are only tried
# (re.match) where a keyword starts: ~20x cheaper than scanning every position.
_VALUE_FIRST = (
    keyword.PRECEDED_BY_EQUAL_COMPARISON_SIGNS_QUOTES_REQUIRED_REGEX,  # "x" == password
    _XML_ELEMENT,
    _NETRC,
)
_KEY_FIRST = tuple(regex for regex in _KEYWORD_GROUPS if regex not in _VALUE_FIRST)
_KEYWORD_WORD = re.compile(_KEYWORDS, re.IGNORECASE)
# Lowercase cues covering every keyword above; runs on lowered text.
_KEYWORD_GATE = re.compile(r"pass|pwd|secret|key|contras")
_KEY_CHARS = re.compile(r"[\w\-]*")
# Names that hold something *about* a secret, not the secret itself.
_NOT_A_VALUE_KEY = re.compile(
    r"(?:name|ref|id|ids|path|file|filename|dir|type|arn|env|var|field|label|prompt|hint|help|"
    r"text|message|msg|error|placeholder|policy|length|len|min|max|count|url|uri|manager|provider|"
    r"store|backend|hasher|hashers|validators?|reset|changed|expires?|expiry|ttl|timeout|header|"
    r"selector|input|version|strength|rotation|required|enabled|prefix|suffix)$",
    re.IGNORECASE,
)
_PLACEHOLDER = re.compile(
    r"(?:none|null|nil|undefined|true|false|yes|no|empty|string|str|bytes|int|"
    r"changeme|change[_\-]?me|password|passwd|secret|pass|pwd|example|sample|dummy|fake|"
    r"placeholder|redacted|hidden|masked|todo|tbd|fixme|xxx+|x+|\*+|\.+|-+|_+|"
    r"value|your[_\- ].*|.*[_\-]here|<.*>|\{.*\}|\[.*\]|%\(?\w*\)?s|%s|\?+|![A-Za-z]+|"  # !vault: a YAML tag
    r"os\.environ.*|process\.env.*|env\(.*|getenv.*|settings\..*|config\..*)",
    re.IGNORECASE,
)
_LETTERS_ONLY = re.compile(r"[A-Za-z_]+")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_NAME_LIKE = re.compile(r"[A-Za-z_]+\d{0,3}")  # digits only at the end, as people name things
_VARIABLE_REFERENCE = re.compile(r"\$[A-Za-z_{(]")
_UNQUOTED_CUT = re.compile(r"[\s;,]|&(?=\w+=)")  # "&" only as a query-string separator
_MIN_QUOTED = 4
_MIN_UNQUOTED = 6
_QUOTES = "\"'`"


def _keyword_passwords(scan: _Scan) -> Iterator[Finding]:
    for line_start, line in scan.lines_with(_KEYWORD_GATE):
        for start, end in _keyword_values(line):
            yield Finding("password", line_start + start, line_start + end)


def _keyword_values(line: str) -> Iterator[tuple[int, int]]:
    key_starts = [hit.start() for hit in _KEYWORD_WORD.finditer(line)]
    if not key_starts:
        return
    matches = [m for regex in _KEY_FIRST for pos in key_starts if (m := regex.match(line, pos))]
    matches += (m for regex in _VALUE_FIRST for m in regex.finditer(line))
    for match in matches:
        group = _KEYWORD_GROUPS[match.re]
        span = _value_span(line, match.start(group), match.end(group))
        if span and _is_secret_value(line, match, span):
            yield span


def _value_span(line: str, start: int, end: int) -> tuple[int, int] | None:
    """The value's span: whole if quoted, else its first token (the rest is code or a comment)."""
    if _is_quoted(line, start, end):
        return start, end
    cut = _UNQUOTED_CUT.search(line, start, end)
    end = cut.start() if cut else end
    while end > start and line[end - 1] in ")]}>\"'`:.":  # closing code, sentence punctuation
        end -= 1
    return (start, end) if end > start else None


def _is_quoted(line: str, start: int, end: int) -> bool:
    return 0 < start and end < len(line) and line[start - 1] in _QUOTES and line[end] == line[start - 1]


def _is_secret_value(line: str, match: re.Match[str], span: tuple[int, int]) -> bool:
    key_start, key_end = _key_span(line, match, span)
    if _NOT_A_VALUE_KEY.search(line[key_start:key_end]):
        return False
    value, quoted = line[span[0] : span[1]], _is_quoted(line, *span)
    if not _is_literal_value(value, quoted):
        return False
    if quoted or key_end > span[0]:
        return True
    # Unquoted, after the key: in code that is an expression. Comparisons are code;
    # a name (user_password2, hunter2) passes only in config style, where the
    # operator hugs the key (KEY=value, key: value, <key>value), not in code
    # (password = pw2).
    operator = line[key_end : span[0]]
    if "==" in operator or "!=" in operator:
        return False
    return not _NAME_LIKE.fullmatch(value) or operator.lstrip("\"']")[:1] in ("=", ":", ">")


def _is_literal_value(value: str, quoted: bool) -> bool:
    """A literal that could be a secret, not a placeholder, template or expression."""
    if _PLACEHOLDER.fullmatch(value.strip()) or _looks_like_detect_secrets_false_positive(value):
        return False
    if _IDENTIFIER.fullmatch(value) and _KEYWORD_WORD.search(value):
        return False  # a field name: "new_password1", "api_key_header"
    if value.rstrip().endswith(":"):
        return False  # a prompt: ask_password("Password: ")
    return len(value) >= _MIN_QUOTED if quoted else _is_unquoted_secret(value)


def _looks_like_detect_secrets_false_positive(value: str) -> bool:
    # detect-secrets' own filters, except is_prefixed_with_dollar_sign: it drops
    # every value starting with "$", generated passwords included; we drop only
    # variable references ($VAR, ${VAR}, $(cmd)).
    return (
        heuristic.is_templated_secret(value)
        or bool(_VARIABLE_REFERENCE.match(value))
        or heuristic.is_sequential_string(value)
        or heuristic.is_not_alphanumeric_string(value)
    )


def _is_unquoted_secret(value: str) -> bool:
    # Unquoted values in code are mostly expressions: calls, subscripts, attribute
    # paths, plain identifiers, paths. A literal secret has a digit or a symbol.
    if len(value) < _MIN_UNQUOTED or any(c in value for c in "()[]{}<>"):
        return False
    if value.startswith(("/", "./", "~/", "\\")) or _DOTTED_NAME.fullmatch(value):
        return False
    return not _LETTERS_ONLY.fullmatch(value)


def _key_span(line: str, match: re.Match[str], value: tuple[int, int]) -> tuple[int, int]:
    """The full identifier holding the keyword (e.g. ``DB_PASSWORD_FILE``)."""
    for hit in _KEYWORD_WORD.finditer(line, match.start(), match.end()):
        if value[0] <= hit.start() < value[1]:
            continue  # the keyword is inside the value ("secret": "my-secret-1")
        left = hit.start()
        while left > 0 and (line[left - 1].isalnum() or line[left - 1] in "_-"):
            left -= 1
        right = _KEY_CHARS.match(line, hit.start())
        return left, right.end() if right else hit.end()
    return match.start(), match.start()


# --------------------------------------------------------------------------- #
# PII: email, IP address, phone                                                #
# --------------------------------------------------------------------------- #

_EMAIL = re.compile(
    r"(?<![\w.%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}"
    r"@((?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24}))(?![\w\-]|\.[A-Za-z0-9])"
)
# "TLDs" that are really file extensions: icon@2x.png, pkg@1.0.0.tgz.
_FILE_EXTENSION_TLDS = frozenset(
    "png jpg jpeg gif svg webp ico js mjs ts tsx jsx py pyc css scss json md txt html htm lock "
    "yml yaml toml cfg ini xml csv tgz gz zip whl tar jar so dll exe sh rb go rs".split()
)


def _emails(scan: _Scan) -> Iterator[Finding]:
    text = scan.text
    for match in _EMAIL.finditer(text):
        domain = match.group(1).lower()
        if match.group(2).lower() in _FILE_EXTENSION_TLDS or domain.startswith(("self.", "cls.")):
            continue  # a file name, or Python's matrix multiply: x@self.weight
        if text.startswith(":", match.end()) or _in_url_authority(text, match.start()):
            continue  # git@github.com:org/repo (scp syntax), https://user:pw@host
        yield Finding("email", match.start(), match.end())


def _in_url_authority(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    scheme = text.rfind("://", line_start, pos)
    return scheme != -1 and not re.search(r"[\s/\"'<>]", text[scheme + 3 : pos])


_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(
    r"(?<![\w:.])(?=[0-9A-Fa-f:.]*\d)"  # not inside a word; holds a digit
    r"[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:\.\d{1,3}){0,3}"  # groups, maybe an embedded IPv4
    r"(?![\w:])"
)
# Immediately before a dotted quad, these make it a version, a section number or
# an OID: v1.2.3.4, pins, app-1.2.3.4.tar.gz, __version__ = ", RFC 5891 §4.2.3.1,
# ObjectIdentifier("2.5.4.6").
_VERSION_CUE = re.compile(
    r"(?:\b[vV]|(?:==|>=|<=|~=|!=|\^|~)\s*|\w[-_]|\brfc\s*\d+[\s:,]*"
    r"|(?<![a-z])(?:version|ver|release|build|tag|rev|firmware|fw|section|sec|chapter|oid|objectidentifier)"
    r"_*[\s:=\"'(]*|§\s*)$",
    re.IGNORECASE,
)
_DOCUMENTATION_NETS = tuple(
    ipaddress.ip_network(net)
    for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)


def _ip_addresses(scan: _Scan) -> Iterator[Finding]:
    text = scan.text
    for regex in (_IPV4, _IPV6):
        for match in regex.finditer(text):
            if regex is _IPV4 and _VERSION_CUE.search(text, max(0, match.start() - 24), match.start()):
                continue
            if _is_personal_address(match.group()) and not _is_network(text, match):
                yield Finding("ip_address", match.start(), match.end())


_PREFIX_LENGTH = re.compile(r"/(\d{1,3})(?!\d)")


def _is_network(text: str, match: re.Match[str]) -> bool:
    """10.2.0.0/16 names a network (host bits zero), not anybody's host."""
    prefix = _PREFIX_LENGTH.match(text, match.end())
    if not prefix:
        return False
    try:
        ipaddress.ip_network(f"{match.group()}/{prefix.group(1)}", strict=True)
    except ValueError:
        return False  # host bits set (inet 192.168.1.5/24): an interface address
    return True


def _is_personal_address(candidate: str) -> bool:
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return False
    return not (
        address.is_loopback
        or address.is_unspecified
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved  # also rules out 1:2:3::, a::b, 255.255.255.0
        or any(address in net for net in _DOCUMENTATION_NETS)
    )


# The matcher is slow (~0.15 MB/s), so it only sees short windows around
# plausible candidates: 7+ digits with phone punctuation, not glued to a word or
# path, and not a date, a dotted quad/OID/float (dots alone only in the North
# American 415.555.2671 grouping) or a bare digit run.
_PHONE_CANDIDATE = re.compile(r"[+(]?\d[\d \t().\-/]{5,24}\d")
_PHONE_NOT_CANDIDATE = re.compile(r"\d{4}-\d\d-\d\d(?:[ T]\d\d)?|\d+|[\d.]+")
_NANP_DOTTED = re.compile(r"\d{3}\.\d{3}\.\d{4}")
_DOTTED_QUAD = re.compile(r"\d+\.\d+\.\d+\.\d+")
_PHONE_WINDOW = 12
_PHONE_SEPARATORS = frozenset(" \t().-/")
_COUNTRY_PREFIX = re.compile(r"^\+\d{1,3}[ .-]?")


def _phones(scan: _Scan) -> Iterator[Finding]:
    text = scan.text
    for candidate in _PHONE_CANDIDATE.finditer(text):
        if not _is_phone_candidate(text, candidate):
            continue
        line_start, line = scan.line_at(candidate.start())
        lo = max(line_start, candidate.start() - _PHONE_WINDOW)
        hi = min(line_start + len(line), candidate.end() + _PHONE_WINDOW)
        for found in phonenumbers.PhoneNumberMatcher(text[lo:hi], PHONE_REGION):
            start, end = lo + found.start, lo + found.end
            if _looks_like_phone(found.raw_string) and not _glued_to_code(text, start, end):
                yield Finding("phone", start, end)


def _is_phone_candidate(text: str, candidate: re.Match[str]) -> bool:
    raw = candidate.group()
    if sum(c.isdigit() for c in raw) < 7 or _glued_to_code(text, candidate.start(), candidate.end()):
        return False
    if _DOTTED_QUAD.search(raw):
        return False  # an address, network or version: 192.52.193.0/24
    return not _PHONE_NOT_CANDIDATE.fullmatch(raw) or bool(_NANP_DOTTED.fullmatch(raw))


def _looks_like_phone(raw: str) -> bool:
    # A national number without any grouping is an id/timestamp far more often,
    # and people group with dots or with spaces/dashes, not both ("1 192.0.2.10 2001").
    grouping = _COUNTRY_PREFIX.sub("", raw)
    if "." in grouping and any(c in grouping for c in " -()/"):
        return False
    return raw.startswith("+") or any(c in _PHONE_SEPARATORS for c in raw)


def _glued_to_code(text: str, start: int, end: int) -> bool:
    """Digits attached to a word, path or version (Chrome/122.0.6099.1, ORD-2024-510183)."""
    before = text[start - 1] if start else " "
    after = text[end : end + 2]
    return before.isalnum() or before in "/._-" or bool(re.match(r"\w|\.\d", after))


# --------------------------------------------------------------------------- #
# Merge and replace                                                            #
# --------------------------------------------------------------------------- #

_PRIORITY = {kind: rank for rank, kind in enumerate(KINDS)}


def _drop_marker_overlaps(findings: Iterable[Finding], text: str) -> list[Finding]:
    markers = [m.span() for m in _MARKER_RE.finditer(text)]  # sorted, disjoint
    marker_ends = [end for _, end in markers]

    def overlaps_a_marker(finding: Finding) -> bool:
        i = bisect.bisect_right(marker_ends, finding.start)  # first marker ending after start
        return i < len(markers) and markers[i][0] < finding.end

    return [f for f in findings if f.end > f.start and not overlaps_a_marker(f)]


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


def _find(text: str) -> list[Finding]:
    return _merge(_drop_marker_overlaps(_detect(_Scan(_mask_markers(text))), text))


def _find_around_markers(rendered: str) -> list[Finding]:
    """Findings on the lines holding a marker: all other lines are as they were
    scanned already, and every detector but the private-key one is line-local.

    Those lines are scanned as one text (joined by line breaks, so nothing can
    match across them), then mapped back.
    """
    blocks = _marker_lines(rendered)
    joined_starts: list[int] = []
    pieces: list[str] = []
    cursor = 0
    for start, end in blocks:
        joined_starts.append(cursor)
        pieces.append(rendered[start:end])
        cursor += end - start + 1
    found: list[Finding] = []
    for finding in _find("\n".join(pieces)):
        i = bisect.bisect_right(joined_starts, finding.start) - 1
        block_start, block_end = blocks[i]
        shift = block_start - joined_starts[i]
        if finding.end + shift <= block_end:  # a key block cannot span two of them
            found.append(Finding(finding.kind, finding.start + shift, finding.end + shift))
    return found


def _marker_lines(text: str) -> list[tuple[int, int]]:
    """Spans of the lines holding a marker, adjacent lines joined."""
    spans: list[tuple[int, int]] = []
    for marker in _MARKER_RE.finditer(text):
        start = text.rfind("\n", 0, marker.start()) + 1
        end = text.find("\n", marker.end())
        end = len(text) if end == -1 else end
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


# A stretch of original text inside the rendered one: (rendered start, original start, length).
_Segment = tuple[int, int, int]


def _render(text: str, findings: list[Finding]) -> tuple[str, list[_Segment]]:
    pieces: list[str] = []
    segments: list[_Segment] = []
    cursor = rendered = 0
    for finding in findings:
        segments.append((rendered, cursor, finding.start - cursor))
        marker = f"[REDACTED:{finding.kind}]"
        pieces += [text[cursor : finding.start], marker]
        rendered += finding.start - cursor + len(marker)
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
