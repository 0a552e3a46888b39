"""Passwords: literal values assigned to secret-sounding names.

detect-secrets' KeywordDetector patterns (quoted values in code, unquoted ones
in YAML, .env and INI), our supplement for what they miss, then value filters
that drop placeholders, references, expressions and field names
(``_is_secret_value``). ``is_literal_value``, ``PLACEHOLDER`` and
``DOTTED_NAME`` are shared with the credential contexts in ``secrets``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from detect_secrets.filters import heuristic
from detect_secrets.plugins import keyword

from tenants.redaction.scan import Finding, Scan


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
# Each alternative opens with a literal (the look back comes after "pass"), so the re module finds
# keywords by its fast prefix scan instead of trying every position: ~4-25x faster.
_KEYWORDS = r"(?:%s|pass\b(?<=[a-z0-9][_-]pass))" % "|".join(keyword.DENYLIST)
_ASSIGN = r"[\w-]*[\"'\]]{0,2}\s*(?::=|=>|[:=])\s*"
_KEYWORD_SUPPLEMENT: dict[re.Pattern[str], int] = {
    re.compile(_KEYWORDS + _ASSIGN + r"""@?(["'`])([^"'`\n]+)\1""", re.IGNORECASE): 2,
    re.compile(_KEYWORDS + _ASSIGN + r"""([^\s"'`]+)""", re.IGNORECASE): 1,
    re.compile(_KEYWORDS + r"""\w*\s*:\s*[\w\[\]., |]+?=\s*(["'])([^"'\n]+)\1""", re.IGNORECASE): 2,
}
_XML_ELEMENT = re.compile(r"<(?:%s)[\w-]*>([^<\n]+)</" % _KEYWORDS, re.IGNORECASE)
# .netrc: "password x" alone on its line or after "login <user>"; the value must
# hold a digit, or any line of prose ending in "password <word>" would match. Multiline: it is
# matched within a line of the whole text, where "^" is the position after a line break.
_NETRC = re.compile(r"""(?:^[ \t]*|\blogin\s+\S+\s+)(?:password|passwd)[ \t]+(?=\S*\d)([^\s"'`=:]\S*)\s*$""", re.MULTILINE)
_KEYWORD_GROUPS = {**_KEYWORD_PATTERNS, **_KEYWORD_SUPPLEMENT, _XML_ELEMENT: 1, _NETRC: 1}
# All but these open with the keyword, so on a line the others are only tried
# (re.match) where a keyword starts: ~20x cheaper than scanning every position.
_VALUE_FIRST = (
    keyword.PRECEDED_BY_EQUAL_COMPARISON_SIGNS_QUOTES_REQUIRED_REGEX,  # "x" == password
    _XML_ELEMENT,
    _NETRC,
)
_KEY_FIRST = tuple(regex for regex in _KEYWORD_GROUPS if regex not in _VALUE_FIRST)
# Each with the substrings one of which every match holds, looked for first: most lines lack them.
_VALUE_FIRST_CUES = tuple(
    (regex, re.compile("|".join(map(re.escape, cues))))
    for regex, cues in zip(_VALUE_FIRST, (("==", "!=", "=!", "!!"), ("<",), ("pass",)), strict=True)
)
_ANY_VALUE_FIRST_CUE = re.compile("|".join(cues.pattern for _, cues in _VALUE_FIRST_CUES))
# How far past its keyword an assignment is read. Some of the patterns above read an unquoted
# value to the end of the line, so on a long line with many keywords an unbounded match is
# quadratic; a longer quoted value is not a password anyone types.
_MAX_ASSIGNMENT = 512
_KEYWORD_WORD = re.compile(_KEYWORDS, re.IGNORECASE)
# The same on ASCII-lowered text, where it finds every keyword 3x faster (ñ is not ASCII).
_KEYWORD_IN_LOWERED = re.compile(_KEYWORDS.replace("ñ", "[ñÑ]"))
_ANY_ASSIGNMENT = re.compile(_KEYWORDS + _ASSIGN + r"""(?:(["'`])([^"'`\n]+)\1|([^\s"'`]+))""", re.IGNORECASE)
_KEY_CHARS = re.compile(r"[\w\-]*")
# Names that hold something *about* a secret, not the secret itself (lowered suffixes).
_NOT_A_VALUE_KEY = tuple(
    "name ref id ids path file filename dir type arn env var field label prompt hint help text message msg error "
    "placeholder policy length len min max count url uri manager provider store backend hasher hashers validator "
    "validators reset changed expire expires expiry ttl timeout header selector input version strength rotation "
    "required enabled prefix suffix".split()
)
PLACEHOLDER = re.compile(
    r"(?:none|null|nil|undefined|true|false|yes|no|empty|string|str|bytes|int|"
    r"changeme|change[_\-]?me|password|passwd|secret|pass|pwd|example|sample|dummy|fake|"
    r"placeholder|redacted|hidden|masked|todo|tbd|fixme|xxx+|x+|\*+|\.+|-+|_+|"
    r"value|your[_\- ].*|.*[_\-]here|<.*>|\{.*\}|\[.*\]|%\(?\w*\)?s|%s|\?+|![A-Za-z]+|"  # !vault: a YAML tag
    r"os\.environ.*|process\.env.*|env\(.*|getenv.*|settings\..*|config\..*)",
    re.IGNORECASE,
)
# settings.DB_PASSWORD, ed25519.Ed25519PrivateKey: an attribute path opens with a
# plain name (digits only at its end), unlike a secret that happens to hold a dot.
DOTTED_NAME = re.compile(r"[A-Za-z_]+\d*(?:\.[A-Za-z_]\w*)+")
_LETTERS_ONLY = re.compile(r"[A-Za-z_]+")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_NAME_LIKE = re.compile(r"[A-Za-z_]+\d{0,3}")  # digits only at the end, as people name things
_VARIABLE_REFERENCE = re.compile(r"\$[A-Za-z_{(]")
_UNQUOTED_CUT = re.compile(r"[\s;,]|&(?=\w+=)")  # "&" only as a query-string separator
_MIN_QUOTED = 4
_MIN_UNQUOTED = 6
_QUOTES = "\"'`"


def detect(scan: Scan) -> Iterator[Finding]:
    """Every keyword's assigned value, read within the keyword's line (``endpos``: no pattern
    reads past it). The patterns and filters cost ~50 us a keyword, so they run within a budget;
    past it, any plain assignment's value is redacted unfiltered. The budget is fresh on each
    rescan, so a marker's line is checked in full again. One pass over the keywords, whatever
    the lines: many short lines cost no more per byte than one long one."""
    text, budget = scan.text, scan.budget(bytes_per_check=400, free=100)
    line_end = -1
    for hit in _KEYWORD_IN_LOWERED.finditer(scan.lower):
        pos = hit.start()
        if pos > line_end:
            line_start, line_end = scan.line_bounds(pos)
            if _ANY_VALUE_FIRST_CUE.search(text, line_start, line_end):
                value_first = (m for regex, cues in _VALUE_FIRST_CUES if cues.search(text, line_start, line_end)
                               for m in regex.finditer(text, line_start, line_end))
                yield from _secret_values(scan, value_first)
        reach = min(line_end, pos + _MAX_ASSIGNMENT)
        if budget.spend():
            yield from _secret_values(scan, (m for regex in _KEY_FIRST if (m := regex.match(text, pos, reach))))
        elif (match := _ANY_ASSIGNMENT.match(text, pos, reach)) and not scan.in_marker(value := match.start(match.lastindex)):
            if span := _value_span(text, value, match.end(match.lastindex)):
                yield Finding("password", *span)


def _secret_values(scan: Scan, matches: Iterable[re.Match[str]]) -> Iterator[Finding]:
    """The values of the matches that pass the filters. A value in a marker is redacted
    already: it is left out before them."""
    text, verdicts = scan.text, set()  # several patterns read the same assignment: filtered once
    for match in matches:
        group = _KEYWORD_GROUPS[match.re]
        if scan.in_marker(match.start(group)) or not (span := _value_span(text, match.start(group), match.end(group))):
            continue
        seen = (match.start(), match.end(), span)  # all that _is_secret_value reads
        if seen not in verdicts and _is_secret_value(text, match, span):
            yield Finding("password", *span)
        verdicts.add(seen)


def _value_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The value's span: whole if quoted, else its first token (the rest is code or a comment)."""
    if _is_quoted(text, start, end):
        return start, end
    cut = _UNQUOTED_CUT.search(text, start, end)
    end = cut.start() if cut else end
    while end > start and text[end - 1] in ")]}>\"'`:.":  # closing code, sentence punctuation
        end -= 1
    return (start, end) if end > start else None


def _is_quoted(text: str, start: int, end: int) -> bool:
    return 0 < start and end < len(text) and text[start - 1] in _QUOTES and text[end] == text[start - 1]


def _is_secret_value(text: str, match: re.Match[str], span: tuple[int, int]) -> bool:
    key_start, key_end = _key_span(text, match, span)
    if text[key_start:key_end].lower().endswith(_NOT_A_VALUE_KEY):
        return False
    value, quoted = text[span[0] : span[1]], _is_quoted(text, *span)
    if not is_literal_value(value, quoted):
        return False
    if quoted or key_end > span[0]:
        return True
    # Unquoted, after the key: in code that is an expression. Comparisons are code;
    # a name (user_password2, hunter2) passes only in config style, where the
    # operator hugs the key (KEY=value, key: value, <key>value), not in code
    # (password = pw2).
    operator = text[key_end : span[0]]
    if "==" in operator or "!=" in operator:
        return False
    return not _NAME_LIKE.fullmatch(value) or operator.lstrip("\"']")[:1] in ("=", ":", ">")


def is_literal_value(value: str, quoted: bool) -> bool:
    """A literal that could be a secret, not a placeholder, template or expression."""
    if PLACEHOLDER.fullmatch(value.strip()) or _looks_like_detect_secrets_false_positive(value):
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
    if value.startswith(("/", "./", "~/", "\\")) or DOTTED_NAME.fullmatch(value):
        return False
    return not _LETTERS_ONLY.fullmatch(value)


def _key_span(text: str, match: re.Match[str], value: tuple[int, int]) -> tuple[int, int]:
    """The full identifier holding the keyword (e.g. ``DB_PASSWORD_FILE``)."""
    for hit in _KEYWORD_WORD.finditer(text, match.start(), match.end()):
        if value[0] <= hit.start() < value[1]:
            continue  # the keyword is inside the value ("secret": "my-secret-1")
        left = hit.start()
        while left > 0 and (text[left - 1].isalnum() or text[left - 1] in "_-"):
            left -= 1
        right = _KEY_CHARS.match(text, hit.start())
        return left, right.end() if right else hit.end()
    return match.start(), match.start()
