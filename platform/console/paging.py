"""Cursor pages for the console's long lists, newest first: the cursor is the last row's (time,
id), so a page stays right while new rows arrive, and reading one costs an index range, not
an offset scan."""

import base64
import json
from dataclasses import dataclass

from django.core.exceptions import SuspiciousOperation, ValidationError
from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

PAGE_SIZE = 100


@dataclass
class CursorPage:
    rows: list
    next_cursor: str | None


def page_of(rows: QuerySet, *, by: str, cursor: str | None, tiebreak: str = "pk") -> CursorPage:
    """One page of `rows` by `by` (a time field) descending, then by `tiebreak` (a field no two
    rows share; where the pk counts every tenant's rows, a random one), after `cursor`; a
    cursor this console did not give out is a 400 (SuspiciousOperation)."""
    size = PAGE_SIZE
    rows = rows.order_by(f"-{by}", f"-{tiebreak}")
    if cursor:
        key_field = rows.model._meta.pk if tiebreak == "pk" else rows.model._meta.get_field(tiebreak)
        at, key = _decoded(cursor, key_field)
        rows = rows.filter(Q(**{f"{by}__lt": at}) | Q(**{by: at, f"{tiebreak}__lt": key}))
    found = list(rows[:size + 1])
    last = found[size - 1] if len(found) > size else None
    return CursorPage(rows=found[:size], next_cursor=_encoded(getattr(last, by), getattr(last, tiebreak)) if last else None)


def _encoded(at, key) -> str:
    return base64.urlsafe_b64encode(json.dumps([at.isoformat(), str(key)]).encode()).decode()


def _decoded(cursor: str, key_field):
    try:
        at, key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        moment = parse_datetime(at)
        if moment is None or not isinstance(key, str):
            raise ValueError
        return moment, key_field.to_python(key)  # else the query fails on it: a 500
    except (ValueError, TypeError, UnicodeError, ValidationError):
        raise SuspiciousOperation("Not a cursor this console gave out: use the page links.") from None
