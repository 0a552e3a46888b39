"""Private key blocks: PEM, OpenSSH, PGP and PuTTY keys, header to end.

detect-secrets' PrivateKeyDetector finds the ``BEGIN ... PRIVATE KEY`` header;
``detect`` extends the span to the matching END line, or over the base64 body
when the key is cut off, and drops bare headers. The only detector that is not
line-local.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from detect_secrets.plugins.private_key import PrivateKeyDetector

from tenants.redaction.scan import Finding, Scan

_KEY_HEADERS = (*PrivateKeyDetector.denylist, re.compile(r"BEGIN ENCRYPTED PRIVATE KEY"))
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PUTTY_END = re.compile(r"Private-MAC: *[0-9a-fA-F]+")
# Body of a key cut off before its END line: base64, line breaks (also escaped
# ones, as in a JSON string) and PEM headers.
_KEY_BODY = re.compile(r"(?:[A-Za-z0-9+/=\s]|\\[nr]|(?:Proc-Type|DEK-Info|Comment):[^\n]*)*")
_MAX_KEY_CHARS = 20_000
_MIN_KEY_BODY = 32  # base64 characters; a bare header is a constant, not a key


def detect(scan: Scan) -> Iterator[Finding]:
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
