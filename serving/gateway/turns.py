"""Fair turns at the model servers: the gateway sends at most `slots` completions upstream at
once, and when they are all taken, waiting requests get the next free slot one organization
at a time, round robin. An organization's burst then waits behind its own requests, not in
front of everyone else's in vLLM's first-come queue.

Per gateway process, on its event loop. With `slots` at about what the replicas batch at
once (vLLM's max_num_seqs times the replicas, over the gateway processes), vLLM's own queue
stays short and the order is decided here.
"""

import asyncio
from collections import OrderedDict, deque
from collections.abc import Hashable


class TurnTimeout(Exception):
    """No slot came free in time."""


class FairTurns:
    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError(f"need at least one slot, not {slots}")
        self.slots = slots
        self._free = slots
        self._waiting: OrderedDict[Hashable, deque[asyncio.Future]] = OrderedDict()

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def take(self, org_id: Hashable, *, timeout_s: float) -> "Turn":
        """A slot for one completion of this organization, when its turn comes."""
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return Turn(self)
        turn = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(org_id, deque()).append(turn)
        try:
            await asyncio.wait_for(asyncio.shield(turn), timeout_s)
        except (asyncio.TimeoutError, asyncio.CancelledError) as error:
            if turn.done() and not turn.cancelled():  # handed a slot just as it gave up: pass it on
                self._hand_on()
            else:
                turn.cancel()
                self._forget(org_id, turn)
            if isinstance(error, asyncio.TimeoutError):
                raise TurnTimeout(f"No model server slot came free within {timeout_s:g} s.") from None
            raise
        return Turn(self)

    def _hand_on(self) -> None:
        """A slot came free: to the next organization in the round, else back to the pool."""
        while self._waiting:
            org_id, queue = next(iter(self._waiting.items()))
            turn = queue.popleft()
            if queue:
                self._waiting.move_to_end(org_id)  # its next request waits for every other organization's
            else:
                del self._waiting[org_id]
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1

    def _forget(self, org_id: Hashable, turn: asyncio.Future) -> None:
        queue = self._waiting.get(org_id)
        if queue is not None and turn in queue:
            queue.remove(turn)
            if not queue:
                del self._waiting[org_id]


class Turn:
    """A slot held; given back exactly once."""

    def __init__(self, turns: FairTurns):
        self._turns: FairTurns | None = turns

    def release(self) -> None:
        turns, self._turns = self._turns, None
        if turns is not None:
            turns._hand_on()
