"""Large texts are redacted aside: in a process of their own at low CPU priority, so that one
organization's big recordings (redaction reads every byte, at about 1 MB per CPU-second on the
densest text) take only what the web server's interactive work leaves, instead of holding its
interpreter from everyone's requests. Small texts, nearly all of them, stay in the caller's
process: a hop to another process costs more than their redaction.

Large recordings share the one process first come, first served; the tenant API's bytes per
minute bound how much of its time one organization can take (tenants/api/throttling.py).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from tenants.redaction import redact, redact_messages

NICENESS = 10  # CFS weight 110 against a normal process's 1,024: under contention, about a tenth of a core

_pool: ProcessPoolExecutor | None = None
_lock = threading.Lock()


def redact_interaction(messages: list[dict[str, Any]], completion: str, *, aside_over: int) -> tuple[list[dict[str, Any]], str, int]:
    """The messages and completion redacted, and how many findings were replaced; aside when
    their text is longer than `aside_over` characters (0: never)."""
    if not aside_over or _text_size(messages) + len(completion) <= aside_over:
        return _redact_interaction(messages, completion)
    try:
        return _executor().submit(_redact_interaction, messages, completion).result()
    except BrokenProcessPool:  # the process died (killed, out of memory): a fresh one next time, this text here
        _discard()
        return _redact_interaction(messages, completion)


def worker_pid() -> int:
    """The aside process's pid (it starts on first use)."""
    return _executor().submit(os.getpid).result()


def _redact_interaction(messages, completion):
    messages, in_messages = redact_messages(messages)
    redacted = redact(completion)
    return messages, redacted.text, in_messages + len(redacted.findings)


def _executor() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            # spawn, not fork: the web server's threads and connections must not be copied into it
            _pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
                                        initargs=(os.getpid(),))
        return _pool


def _discard() -> None:
    global _pool
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None


def _start_worker(parent: int) -> None:
    """Low priority, and gone with the web server: a pool's worker outlives a parent killed
    without its exit handlers (SIGTERM, SIGKILL), holding its pipes open. It watches its parent
    process rather than asking for a parent-death signal, which Linux sends when the *thread*
    that started it ends: a request's thread, gone once the request is answered."""
    os.nice(NICENESS)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def _text_size(value: Any) -> int:
    """Characters of text in a message list, however nested (content parts, tool calls)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_text_size(item) for item in value.values())
    if isinstance(value, list):
        return sum(_text_size(item) for item in value)
    return 0
