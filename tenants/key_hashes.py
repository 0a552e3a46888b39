"""Which bearer keys could be keys at all, told without a database query per request.

Anyone can send a key, and every lookup of one that does not exist would cost a database round
trip (at the gateway, on the threads that also write every organization's recordings). So the
gateway and the tenant API's admission each keep, per web process, the hashes of the keys there
are (every 10 minutes all keys in use; between those, the ones made since the read before, read
at most every 50 ms on a thread of their caller's choosing), and a key whose hash is not among
them is refused on the event loop. A made-up key then costs a set lookup; a key made a moment
ago waits for the next read; misses at the same time share one read.

Stale in one direction only: a revoked key, or a deleted organization's, stays here until the
next full read, and its own lookup says no (then it is dropped at once).
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

from django.utils import timezone

from tenants.organizations import Principal, api_key_hash, api_key_hashes

RELOAD_S = 600.0  # every key in use, read again: revoked and deleted ones leave
NEWEST_EVERY_S = 0.05  # at most this often, the keys made lately
COMMIT_LAG = timedelta(minutes=1)  # more than any key's commit lags behind its created_at


# Runs a database read off the event loop: the gateway's key-reads thread, a pool thread for the API.
OnThread = Callable[[Callable[[], list[str]]], Awaitable[list[str]]]


class KeyHashes:
    def __init__(self, *, on_thread: OnThread, clock: Callable[[], float] = time.monotonic):
        self.on_thread = on_thread
        self.clock = clock
        self._hashes: set[str] = set()
        self._loaded_at = -2 * RELOAD_S  # never
        self._read_started = -NEWEST_EVERY_S  # of the last read that ended
        self._read_wall = timezone.now()  # the same, in wall time: what the next read reads since
        self._reading: asyncio.Task | None = None

    async def may_exist(self, raw_key: str) -> bool:
        digest = api_key_hash(raw_key)
        if digest in self._hashes and self.clock() - self._loaded_at < RELOAD_S:
            return True
        arrived = self.clock()
        while self._read_started < arrived:  # a read that began before this miss may not see its key
            if self._reading is None or self._reading.done():
                self._reading = asyncio.get_running_loop().create_task(self._read())
            await asyncio.shield(self._reading)
        return digest in self._hashes

    async def principal_of(self, raw_key: str, look_up: Callable[[str], Awaitable[Principal | None]]) -> Principal | None:
        """The key's principal by `look_up`, which only a key among the hashes costs; a key that
        its lookup finds revoked or gone since they were read is refused here from now on."""
        if not await self.may_exist(raw_key):
            return None
        principal = await look_up(raw_key)
        if principal is None:
            self._hashes.discard(api_key_hash(raw_key))
        return principal

    async def _read(self) -> None:
        await asyncio.sleep(max(0.0, self._read_started + NEWEST_EVERY_S - self.clock()))
        started, started_wall = self.clock(), timezone.now()
        if started - self._loaded_at >= RELOAD_S:
            self._hashes = set(await self.on_thread(api_key_hashes))
            self._loaded_at = started
        else:  # every key made since the last read began, and then some
            since = self._read_wall - COMMIT_LAG
            self._hashes.update(await self.on_thread(lambda: api_key_hashes(created_since=since)))
        self._read_started, self._read_wall = started, started_wall
