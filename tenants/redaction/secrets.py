"""Vendor credentials: detect-secrets' regex plugins, formats it lacks, and contexts.

The plugins' own regexes, or exact linear-time stand-ins for them, give positions,
with the one filter a plugin's ``analyze_string`` adds (JWT's); vendor prefixes detect-secrets 1.5 does not
know (``_VENDOR_PATTERNS``) and credential contexts (``_CONTEXT_PATTERNS``:
``Bearer``/``Basic``, ``*_token = <value>``, ``curl -u user:password``) follow.
The contexts reuse the password module's value filters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from detect_secrets.filters import heuristic
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
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from tenants.redaction.passwords import DOTTED_NAME, PLACEHOLDER, is_literal_value
from tenants.redaction.scan import Finding, Scan


def detect(scan: Scan) -> Iterator[Finding]:
    yield from _plugin_secrets(scan)
    yield from _extra_secrets(scan)


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


# Gates (see Scan.lines_with), one per plugin. Most detect-secrets regexes open
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


# Linear-time stand-ins for the plugins' regexes (the same matches, each tested against its
# original): as written, some of them cost a line's length from every start in it, and a long
# line of "sk-sk-sk-..." (OpenAI), "eyJeyJ..." (JWT), "a:// a:// ..." (npm) or "clkey" and many
# spaces (Cloudant, IBM, SoftLayer) took minutes to scan (docs/security.md).
#
# Exact rewrites of the assignment regexes (RegexBasedDetector.build_assignment_regex), as
# (what detect-secrets writes, what we run):
_ASSIGNMENT_REWRITES = (
    # A run of spaces split three ways (" *", " +", " *"), every split tried before a start
    # fails. Neither a quote nor any value they read starts with a space, so only the splits
    # reading the whole run can succeed: read each run once (possessive), in the same order.
    ("(?: *)(?:=|:|:=|=>| +|::)(?: *)", "(?: *+(?:=|:|:=|=>|::) *+| ++)"),
    # "After a non-word character or at the start" in one look back instead of two, behind a
    # look ahead at what every match starts with (a bracket, a quote, "-", "_" or a letter of
    # the key's name; re.IGNORECASE folds the class as it folds those names). These regexes are
    # tried at every position of a line; a position the look ahead rules out costs one
    # character class, where the look back let every non-word character (punctuation, spaces,
    # the NULs of a rescan's masked markers) into the name's alternatives: ~10x faster there.
    ("(?:(?<=\\W)|(?<=^))", "(?=[-_\\[\"'a-zA-Z])(?<!\\w)"),
)


def _linear(regex: re.Pattern[str]) -> re.Pattern[str]:
    pattern = regex.pattern
    for written, run in _ASSIGNMENT_REWRITES:
        pattern = pattern.replace(written, run)
    return regex if pattern == regex.pattern else re.compile(pattern, regex.flags)


@dataclass(frozen=True)
class _ByStretches:
    """A regex that reads a whole stretch from each start before it fails, and would fail from
    every later start in that stretch too (what it needs after the stretch is the same), with
    where its matches can start and the stretch one failed start rules out."""

    regex: re.Pattern[str]
    starts: re.Pattern[str]
    stretch: re.Pattern[str]

    def finditer(self, line: str) -> Iterator[re.Match[str]]:
        """regex.finditer(line), trying each stretch once."""
        resume = 0
        for start in self.starts.finditer(line):
            if start.start() < resume:
                continue
            if match := self.regex.match(line, start.start()):
                yield match
                resume = match.end()
            else:
                resume = self.stretch.match(line, start.start()).end()


_STRETCHES: dict[type[RegexBasedDetector], tuple[re.Pattern[str], re.Pattern[str]]] = {
    # sk-[A-Za-z0-9-_]*...T3BlbkFJ...: needs its marker further on in the run of key characters
    OpenAIDetector: (re.compile("sk-"), re.compile(r"[A-Za-z0-9_-]*")),
    # eyJ[A-Za-z0-9-_=]+\.: needs a dot where the run of those characters ends
    JwtTokenDetector: (re.compile("eyJ"), re.compile(r"[A-Za-z0-9_=-]*")),
    # //.+/:_authToken=...: needs one further on in the line
    NpmDetector: (re.compile("//"), re.compile(".*")),
}


def _scanner(plugin: RegexBasedDetector, regex: re.Pattern[str]) -> re.Pattern[str] | _ByStretches:
    if type(plugin) in _STRETCHES:
        return _ByStretches(regex, *_STRETCHES[type(plugin)])
    return _linear(regex)


_PLUGIN_SCANNERS = tuple((plugin, kind, tuple(_scanner(plugin, regex) for regex in plugin.denylist)) for plugin, kind in _PLUGIN_KINDS)


def _plugin_secrets(scan: Scan) -> Iterator[Finding]:
    # Plugins are line-based and report values, not positions: we run their regexes for
    # positions (what their analyze_string() would report, without its own slower scan) and
    # apply the one filter a plugin adds there (JWT's check that the token is well formed).
    if not _ANY_PLUGIN_GATE.search(scan.lower):
        return  # most short texts: one scan instead of one per plugin
    tails = _TokenTails(scan.text)
    for plugin, kind, scanners in _PLUGIN_SCANNERS:
        for line_start, line in scan.lines_with(_PLUGIN_GATES[type(plugin)]):
            for scanner in scanners:
                for match in scanner.finditer(line):
                    for value, start, end in _findall_items(match):
                        if _reported(plugin, value) and _is_plausible(plugin, match, value):
                            yield tails.finding(kind, line_start + start, line_start + end)


def _reported(plugin: RegexBasedDetector, value: str) -> bool:
    return plugin.is_formally_valid(value) if isinstance(plugin, JwtTokenDetector) else True


def _is_plausible(plugin: RegexBasedDetector, match: re.Match[str], value: str) -> bool:
    """Drop templates ({password}), filler (ACxxxxxxxx...) and demo URL credentials."""
    if heuristic.is_templated_secret(value) or _is_filler(value):
        return False
    if not isinstance(plugin, BasicAuthDetector):
        return True
    # user:PASSWORD@, user:pass@, postgres:postgres@ are documentation, not credentials.
    user = match.group()[3 : match.start(1) - match.start() - 1]  # the match is "://user:pw@"
    return value != user and not PLACEHOLDER.fullmatch(value) and not _CAPS_NAME.fullmatch(value)


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


class _TokenTails:
    """Findings extended over the rest of their token. Many matches in one long token share
    its end, found once: read from each of them it cost the token's length every time."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._known = (0, -1)  # a stretch of token characters: (where it was read from, where it ends)

    def finding(self, kind: str, start: int, end: int) -> Finding:
        text = self.text
        while start < end and text[start] in _EDGE_NOISE:
            start += 1
        while end > start and text[end - 1] in _EDGE_NOISE:
            end -= 1
        read_from, token_end = self._known
        if not read_from <= end <= token_end:
            self._known = read_from, token_end = end, _TOKEN_TAIL.match(text, end).end()
        return Finding(kind, start, token_end)


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
_CONTEXT_PATTERNS: tuple[tuple[re.Pattern[str] | _ByStretches, re.Pattern[str], str, Callable[[str], bool]], ...] = (
    (
        # "(?=b)" first: a position it rules out costs one character, not the look back and both words
        re.compile(r"(?=b)(?<![\w-])(?:Bearer|Basic)\s+([A-Za-z0-9\-._~+/]{16,}=*)", re.IGNORECASE),
        re.compile(r"bearer|basic"),
        "token",
        lambda value: _looks_generated(value),
    ),
    (
        _linear(RegexBasedDetector.build_assignment_regex(
            prefix_regex=r"(?:access|auth|api|bearer|refresh|session|bot|app|personal|client|secret|ci)",
            secret_keyword_regex=r"token",
            secret_regex=r"([A-Za-z0-9_\-.~+/=]{16,})",
        )),
        re.compile(r"token"),
        "token",
        lambda value: _looks_generated(value),
    ),
    (  # curl -u user:password, wget --user ... (the password after the first colon); a command
        # without one further on in the line fails from every later command too. Its starts are
        # "\b(?:curl|wget)\b" with the words first (the boundary checked four characters back),
        # so that the search skips to a "c" or a "w" instead of trying every position.
        _ByStretches(re.compile(r"\b(?:curl|wget)\b[^\n]*?\s(?:-u|--user)[\s=]+[\"']?[^\s:\"']+:([^\s\"']+)"),
                     starts=re.compile(r"(?:curl|wget)(?<=\b\w{4})\b"), stretch=re.compile(".*")),
        re.compile(r"curl|wget"),
        "password",
        lambda value: is_literal_value(value, quoted=False),
    ),
)


def _extra_secrets(scan: Scan) -> Iterator[Finding]:
    for regex, kind in _VENDOR_PATTERNS:
        for match in regex.finditer(scan.text):
            if _at_word_start(scan.text, match.start(1)):
                yield Finding(kind, match.start(1), match.end(1))
    for regex, gate, kind, check in _CONTEXT_PATTERNS:
        for line_start, line in scan.lines_with(gate):
            for match in regex.finditer(line):
                if check(match.group(1)):
                    yield Finding(kind, line_start + match.start(1), line_start + match.end(1))


def _at_word_start(text: str, pos: int) -> bool:
    return pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] == "_")


def _looks_generated(value: str) -> bool:
    """Machine-made credentials mix letters and digits; names and attribute paths do not."""
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha and not DOTTED_NAME.fullmatch(value)
