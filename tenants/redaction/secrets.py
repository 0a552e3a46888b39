"""Vendor credentials: detect-secrets' regex plugins, formats it lacks, and contexts.

The plugins' own regexes give positions, kept only where the plugin's
``analyze_string`` reports the value; vendor prefixes detect-secrets 1.5 does not
know (``_VENDOR_PATTERNS``) and credential contexts (``_CONTEXT_PATTERNS``:
``Bearer``/``Basic``, ``*_token = <value>``, ``curl -u user:password``) follow.
The contexts reuse the password module's value filters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

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


def _plugin_secrets(scan: Scan) -> Iterator[Finding]:
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
