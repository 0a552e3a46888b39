"""The gateway's database work, on a few long-lived threads that keep their connections.

Django would run it on its per-request thread for sync code (asgiref's thread-sensitive
context), which is a new thread with a new database connection for every request: most of
what the gateway itself costs. Here each thread opens its connection once, and closes it
only when it has failed (the checks Django makes between requests, except the age limit,
since these threads never see a request end).
"""

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connections

from serving.gateway.protocol import DatabaseUnavailable

T = TypeVar("T")
log = logging.getLogger(__name__)

THREADS = 4
_pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="gateway-db")
# The keys there are, read in bulk (tenants/key_hashes.py) on a thread of their own: never behind, nor in front
# of, the recordings.
_key_reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-db-keys")


async def in_db_thread(function: Callable[..., T], *args) -> T:
    return await _on(_pool, function, *args)


async def in_key_reads_thread(function: Callable[..., T], *args) -> T:
    return await _on(_key_reads, function, *args)


async def _on(threads: ThreadPoolExecutor, function: Callable[..., T], *args) -> T:
    return await asyncio.get_running_loop().run_in_executor(threads, functools.partial(_run, function, *args))


def _run(function: Callable[..., T], *args) -> T:
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and connection.errors_occurred and not connection.is_usable():
            connection.close()
    try:
        return function(*args)
    except (OperationalError, InterfaceError) as error:  # down, restarting, unreachable, locked: not the request's fault
        log.warning("The gateway's database call failed: %s", error)
        raise DatabaseUnavailable("The platform's database is unavailable; try again shortly.") from None


def close_connections() -> None:
    """Close every gateway thread's connections (a test database cannot be dropped while
    they are open). One task per thread: each waits at a barrier until all threads hold one."""
    barrier = threading.Barrier(THREADS)

    def close() -> None:
        barrier.wait(timeout=10)
        connections.close_all()

    for future in [_pool.submit(close) for _ in range(THREADS)]:
        future.result()
    _key_reads.submit(connections.close_all).result()
