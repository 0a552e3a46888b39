"""Personal data: email addresses, personal IP addresses and phone numbers.

Emails and IPv4/IPv6 addresses by regex, addresses validated with the stdlib
``ipaddress`` (loopback, reserved, documentation nets, versions and networks
are left alone); phone numbers by ``phonenumbers.PhoneNumberMatcher`` run only
on short windows around plausible candidates.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

import phonenumbers

from tenants.redaction.scan import Finding, Scan

PHONE_REGION = "US"  # region for numbers written without a +country code


def detect(scan: Scan) -> Iterator[Finding]:
    yield from _emails(scan)
    yield from _ip_addresses(scan)
    yield from _phones(scan)


# The regexes below open with a character class and check what precedes it right after
# ("x(?<![\w.]x)" rather than "(?<![\w.])x"): the engine then skips ahead to candidates at C
# speed, where an opening lookbehind is tried at every position (6x slower on redacted text).
_EMAIL = re.compile(
    r"[A-Za-z0-9](?<![\w.%+\-][A-Za-z0-9])[A-Za-z0-9._%+\-]{0,63}"
    r"@((?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24}))(?![\w\-]|\.[A-Za-z0-9])"
)
# "TLDs" that are really file extensions: icon@2x.png, pkg@1.0.0.tgz.
_FILE_EXTENSION_TLDS = frozenset(
    "png jpg jpeg gif svg webp ico js mjs ts tsx jsx py pyc css scss json md txt html htm lock "
    "yml yaml toml cfg ini xml csv tgz gz zip whl tar jar so dll exe sh rb go rs".split()
)


def _emails(scan: Scan) -> Iterator[Finding]:
    text = scan.text
    for match in _EMAIL.finditer(text):
        domain = match.group(1).lower()
        if match.group(2).lower() in _FILE_EXTENSION_TLDS or domain.startswith(("self.", "cls.")):
            continue  # a file name, or Python's matrix multiply: x@self.weight
        if text.startswith(":", match.end()) or _in_url_authority(scan, match.start()):
            continue  # git@github.com:org/repo (scp syntax), https://user:pw@host
        yield Finding("email", match.start(), match.end())


def _in_url_authority(scan: Scan, pos: int) -> bool:
    # Looked for within a bounded reach, so that many addresses on one long line cost its length
    # once; an authority longer than that is redacted, which errs on the safe side.
    text, (line_start, _) = scan.text, scan.line_bounds(pos)
    scheme = text.rfind("://", max(line_start, pos - _AUTHORITY_REACH), pos)
    return scheme != -1 and not _AUTHORITY_BREAK.search(text, scheme + 3, pos)


_AUTHORITY_REACH = 256
_AUTHORITY_BREAK = re.compile(r"[\s/\"'<>]")


_IPV4 = re.compile(r"\d(?<![\w.]\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(
    r"(?<![\w:.])(?=[0-9A-Fa-f:.]*\d)"  # not inside a word; holds a digit
    r"[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:\.\d{1,3}){0,3}"  # groups, maybe an embedded IPv4
    r"(?![\w:])"
)
# Immediately before a dotted quad, these make it a version, a section number or
# an OID: v1.2.3.4, pins, app-1.2.3.4.tar.gz, __version__ = ", RFC 5891 §4.2.3.1,
# ObjectIdentifier("2.5.4.6"). Matched on the lowered text: re.IGNORECASE is ~2x slower.
_VERSION_WORDS = ("version", "ver", "release", "build", "tag", "rev", "firmware", "fw", "section", "sec", "chapter", "oid",
                  "objectidentifier")
_VERSION_CUE = re.compile(
    r"(?:\bv|(?:==|>=|<=|~=|!=|\^|~)\s*|\w[-_]|\brfc\s*\d+[\s:,]*"
    r"|(?<![a-z])(?:%s)_*[\s:=\"'(]*|§\s*)$" % "|".join(_VERSION_WORDS)
)
# The same cue read backwards, from the address out, on the reversed window: a search for a cue
# that must end at the window's end tries every start in it (~3 us an address, most of what a
# dense line of addresses costs), a match from the address tries one. "\n?": "$" also matches
# before a last line break. A test checks the two agree.
_VERSION_CUE_REVERSED = re.compile(
    r"\n?(?:v\b|\s*(?:==|=>|=<|=~|=!|\^|~)|[-_]\w|[\s:,]*\d+\s*cfr\b"
    r"|[\s:=\"'(]*_*(?:%s)(?![a-z])|\s*§)" % "|".join(word[::-1] for word in _VERSION_WORDS)
)
_VERSION_CUE_REACH = 24
_DOCUMENTATION_NETS = tuple(
    ipaddress.ip_network(net)
    for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)


def _ip_addresses(scan: Scan) -> Iterator[Finding]:
    text = scan.text
    for match in _IPV4.finditer(text):
        if _after_version_cue(scan.lower, match.start()):
            continue
        if _is_personal_ipv4(match.group()) and not _is_network(text, match):
            yield Finding("ip_address", match.start(), match.end())
    for match in _IPV6.finditer(text) if ":" in text else ():  # it cannot open with a class
        if _is_personal_address(match.group()) and not _is_network(text, match):
            yield Finding("ip_address", match.start(), match.end())


def _after_version_cue(lowered: str, pos: int) -> bool:
    """Whether a version cue ends at `pos`, within _VERSION_CUE_REACH characters before it."""
    start = max(0, pos - _VERSION_CUE_REACH)
    cue = _VERSION_CUE_REVERSED.match(lowered[start:pos][::-1])
    if cue and cue.end() == pos - start and start > 0:
        # It fills the window: whether it opens a word ("\b", "(?<![a-z])") depends on the
        # character before, which the reversed window lacks.
        return bool(_VERSION_CUE.search(lowered, start, pos))
    return bool(cue)


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


# What _is_personal_address rules out of IPv4, as (network, mask) integers, and the first octets
# they can start with: building an IPv4Address per candidate costs several times the regex that
# found it, and a hostile text holds one every 15 bytes. A test checks the two agree.
_NOT_PERSONAL_IPV4 = tuple(
    (int(net.network_address), int(net.netmask))
    for net in (*map(ipaddress.IPv4Network, ("127.0.0.0/8", "0.0.0.0/32", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4")),
                *(net for net in _DOCUMENTATION_NETS if net.version == 4))
)
_NOT_PERSONAL_FIRST_OCTETS = frozenset(
    octet for network, mask in _NOT_PERSONAL_IPV4 for octet in range(network >> 24, (((network | ~mask) & 0xFFFFFFFF) >> 24) + 1)
)


def _is_personal_ipv4(candidate: str) -> bool:
    """_is_personal_address for a dotted quad of 1-3 digit octets, without building an address."""
    octets = candidate.split(".")
    if not candidate.isascii() or any(len(octet) > 1 and octet[0] == "0" for octet in octets):
        return False  # as ipaddress: other scripts' digits, leading zeros (octal to some parsers)
    try:
        number = int.from_bytes(bytes(map(int, octets)))
    except ValueError:
        return False  # an octet over 255
    if number >> 24 not in _NOT_PERSONAL_FIRST_OCTETS:
        return True
    return not any(number & mask == network for network, mask in _NOT_PERSONAL_IPV4)


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


def _phones(scan: Scan) -> Iterator[Finding]:
    text, budget = scan.text, scan.shared_budget("phone", bytes_per_check=1_000, free=50)  # the matcher: ~0.2-1 ms a window
    for candidate in _PHONE_CANDIDATE.finditer(text):
        if not _is_phone_candidate(text, candidate):
            continue
        if not budget.spend():
            if _looks_like_phone(candidate.group()):
                yield Finding("phone", candidate.start(), candidate.end())
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
    if sum(map(str.isdigit, raw)) < 7 or _glued_to_code(text, candidate.start(), candidate.end()):
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
