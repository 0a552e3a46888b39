"""Cursor pages for the console's long lists, newest first: the cursor is the last row's (time,
id), so a page stays right while new rows arrive, and reading one costs an index range, not
an offset scan."""

import base64
import json
from dataclasses import dataclass

from django.core.exceptions import SuspiciousOperation
from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

PAGE_SIZE = 100


@dataclass
class CursorPage:
    rows: list
    next_cursor: str | None


def page_of(rows: QuerySet, *, by: str, cursor: str | None) -> CursorPage:
    """One page of `rows` by `by` (a time field) descending, after `cursor`; a cursor this
    console did not give out is a 400 (SuspiciousOperation)."""
    size = PAGE_SIZE
    rows = rows.order_by(f"-{by}", "-pk")
    if cursor:
        at, pk = _decoded(cursor)
        rows = rows.filter(Q(**{f"{by}__lt": at}) | Q(**{by: at, "pk__lt": pk}))
    found = list(rows[:size + 1])
    last = found[size - 1] if len(found) > size else None
    return CursorPage(rows=found[:size], next_cursor=_encoded(getattr(last, by), last.pk) if last else None)


def _encoded(at, pk) -> str:
    return base64.urlsafe_b64encode(json.dumps([at.isoformat(), str(pk)]).encode()).decode()


def _decoded(cursor: str):
    try:
        at, pk = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        moment = parse_datetime(at)
        if moment is None or not isinstance(pk, str):
            raise ValueError
        return moment, pk
    except (ValueError, TypeError, UnicodeError):
        raise SuspiciousOperation("Not a cursor this console gave out: use the page links.") from None
