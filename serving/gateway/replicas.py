"""The vLLM replicas as one gateway process sees them: which take traffic, in what order.

A replica takes traffic only while it answers and holds every routed adapter. A watcher on
the gateway's event loop asks each replica what it serves (GET /v1/models) every second. One
that refuses the connection, or fails to answer twice running while it answers no request
either, leaves the rotation; so does one that refuses a request's connection. (A replica serving
alone while another restarts can be too busy to answer a look in time, and is not dropped for
that while its answers to requests still arrive.) One that answers again, or turns out to lack a routed
adapter (it restarted between two looks), is given every routed adapter first and comes back
only then. Requests go to the replica in rotation with the fewest of this process's requests in
flight, replicas with as few taking turns (under light traffic all are idle, and a replica that
came back must take its share).

Each gateway process keeps its own view; loading an adapter twice (two processes noticing
the same restart) is harmless.
"""

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from serving import vllm_client

log = logging.getLogger(__name__)

LOOK_EVERY_S = 1.0
LOOK_TIMEOUT_S = 2.0
MISSED_LOOKS_TO_LEAVE = 2  # a replica too busy to answer once is not dropped for it

Routed = dict[str, Path]  # served name -> the adapter's files


@dataclass(eq=False)
class Replica:
    url: str
    in_flight: int = 0
    in_rotation: bool = False
    missed_looks: int = 0
    answered: bool = False  # a request's answer arrived since the last look
    last_error: str = ""  # the kind of the last look's failure, so that it is logged once

    def leave(self, why: str) -> None:
        if self.in_rotation:
            log.warning("vLLM replica %s leaves the rotation: %s", self.url, why)
        self.in_rotation = False

    def missed(self, error: Exception) -> None:
        """Say why a replica out of the rotation stays out, once per kind of failure."""
        if not self.in_rotation and type(error).__name__ != self.last_error:
            log.info("vLLM replica %s stays out of the rotation: %r", self.url, error)
        self.last_error = type(error).__name__


class Rotation:
    def __init__(self, urls: list[str], *, session: Callable[[], aiohttp.ClientSession], routed: Callable[[], Awaitable[Routed]]):
        self.replicas = [Replica(url.rstrip("/")) for url in urls]
        self._session, self._routed = session, routed
        self._watcher: asyncio.Task | None = None
        self._first_look = asyncio.Event()
        self._turns = itertools.count()

    async def in_order(self) -> list[Replica]:
        """The replicas taking traffic, least busy first (after the first look at them)."""
        await self._watching()
        live = [replica for replica in self.replicas if replica.in_rotation]
        if live:
            first = next(self._turns) % len(live)
            live = live[first:] + live[:first]  # the sort is stable: equals in turn
        return sorted(live, key=lambda replica: replica.in_flight)

    def refused(self, replica: Replica) -> None:
        """A request could not connect to `replica`: out until the watcher sees it answer."""
        replica.missed_looks = MISSED_LOOKS_TO_LEAVE
        replica.leave("it refused a request's connection")

    async def look(self) -> None:
        """Look at every replica once: who answers, who lacks what."""
        try:
            routed = await self._routed()
        except Exception as error:  # the database is down: nobody joins, nobody is dropped for it
            log.warning("Could not read the routed adapters; the replicas' rotation stays as it is: %s", error)
            routed = None
        await asyncio.gather(*(self._look_at(replica, routed) for replica in self.replicas))

    async def _look_at(self, replica: Replica, routed: Routed | None) -> None:
        try:
            served = await vllm_client.served_roots_on(self._session(), replica.url, timeout=LOOK_TIMEOUT_S)
        except (aiohttp.ClientError, asyncio.TimeoutError, vllm_client.VllmError, ValueError, KeyError) as error:
            refused = isinstance(error, aiohttp.ClientConnectorError)
            if refused:
                replica.missed_looks = MISSED_LOOKS_TO_LEAVE
            elif not replica.answered:  # slow to answer a look, but serving: not missed
                replica.missed_looks += 1
            replica.answered = False
            if replica.missed_looks >= MISSED_LOOKS_TO_LEAVE:
                replica.leave(f"it does not answer ({error!r})")
            replica.missed(error)
            return
        replica.missed_looks, replica.answered, replica.last_error = 0, False, ""
        if routed is None:
            return
        missing = {name: path for name, path in routed.items() if served.get(name) != str(path)}
        if missing:
            replica.leave(f"it lacks {len(missing)} routed adapter(s) (restarted?)")
            if not await self._load(replica, missing, served):
                return
        if not replica.in_rotation:
            log.info("vLLM replica %s joins the rotation", replica.url)
            replica.in_rotation = True

    async def _load(self, replica: Replica, missing: Routed, served: dict[str, str]) -> bool:
        try:
            for name, path in missing.items():
                if name in served:  # the name serves other files (a deleted organization's slug taken again)
                    await vllm_client.unload_adapter_on(self._session(), replica.url, name=name)
                await vllm_client.load_adapter_on(self._session(), replica.url, name=name, path=path)
        except vllm_client.VllmError as refused:
            if "already" not in refused.detail:  # another gateway process loaded it meanwhile: looked at again next time
                log.error("vLLM replica %s could not load the routed adapters; it stays out: %s", replica.url, refused)
            return False
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            log.warning("vLLM replica %s went away while it was given its adapters: %r", replica.url, error)
            return False
        return True

    async def _watching(self) -> None:
        loop = asyncio.get_running_loop()
        if self._watcher is None or self._watcher.done() or self._watcher.get_loop() is not loop:
            self._first_look = asyncio.Event()
            self._watcher = loop.create_task(self._watch())
        await self._first_look.wait()

    async def _watch(self) -> None:
        while True:
            try:
                await self.look()
            except Exception:
                log.exception("Looking at the vLLM replicas failed")
            self._first_look.set()
            await asyncio.sleep(LOOK_EVERY_S)

    async def close(self) -> None:
        """Stop watching (a watcher of another event loop is that loop's to stop)."""
        if self._watcher is not None and self._watcher.get_loop() is asyncio.get_running_loop():
            self._watcher.cancel()
