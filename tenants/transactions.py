"""What the ORM leaves to each caller around a transaction: a write that races another for the
next number or key, and a Celery task that must be sent only once its rows are committed.
"""

import logging
from collections.abc import Callable
from typing import TypeVar

from celery import current_app
from django.db import IntegrityError, transaction

log = logging.getLogger(__name__)

T = TypeVar("T")


def retried_on_integrity_error(write: Callable[[], T]) -> T:
    """`write()`, an atomic write that takes the next version or an idempotency key, tried once
    more when a racing transaction committed the same one first: the second try sees the
    winner's row and builds on it (or reports it)."""
    try:
        return write()
    except IntegrityError:
        return write()


def send_on_commit(task_name: str, object_id) -> None:
    """Send the task for `object_id` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: send(task_name, object_id))


def send(task_name: str, object_id, *more_args) -> None:
    """Best effort: the object is committed, and if the broker cannot take its task now, the
    scheduler's recovery sends it again later."""
    try:
        current_app.send_task(task_name, args=[str(object_id), *more_args])
    except Exception:
        log.exception("Could not send %s(%s) to the broker; it will be sent again", task_name, object_id)
