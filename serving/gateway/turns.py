"""Fair turns at the model servers: the gateway sends at most `slots` completions upstream at
once. While several organizations have completions there or waiting, each holds at most an
equal share of the slots; a free slot goes to the waiting organization that holds the fewest
(round robin among equals). An organization's burst then waits behind its own requests, not in
front of everyone else's in vLLM's first-come queue, and a slot another organization has just
given back stays free for its next request instead of going to the burst.

Per gateway process, on its event loop. With `slots` at about what the replicas batch at
once (vLLM's max_num_seqs times the replicas, over the gateway processes), vLLM's own queue
stays short and the order is decided here (docs/operating.md; measured against a flood in
docs/figures.md).
"""

import asyncio
from collections import Counter, OrderedDict, deque
from collections.abc import Hashable


class TurnTimeout(Exception):
    """No slot came free in time."""


class FairTurns:
    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError(f"need at least one slot, not {slots}")
        self.slots = slots
        self._free = slots
        self._held: Counter[Hashable] = Counter()
        self._waiting: OrderedDict[Hashable, deque[asyncio.Future]] = OrderedDict()

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def take(self, org_id: Hashable, *, timeout_s: float) -> "Turn":
        """A slot for one completion of this organization, when its turn comes."""
        turn = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(org_id, deque()).append(turn)
        self._dispatch()
        if turn.done():
            return Turn(self, org_id)
        try:
            await asyncio.wait_for(asyncio.shield(turn), timeout_s)
        except (asyncio.TimeoutError, asyncio.CancelledError) as error:
            if turn.done() and not turn.cancelled():  # handed a slot just as it gave up: pass it on
                self._give_back(org_id)
            else:
                turn.cancel()
                self._forget(org_id, turn)
                self._dispatch()  # one organization fewer may leave the others a larger share
            if isinstance(error, asyncio.TimeoutError):
                raise TurnTimeout(f"No model server slot came free within {timeout_s:g} s.") from None
            raise
        return Turn(self, org_id)

    def _give_back(self, org_id: Hashable) -> None:
        self._held[org_id] -= 1
        if self._held[org_id] <= 0:
            del self._held[org_id]
        self._free += 1
        self._dispatch()

    def _dispatch(self) -> None:
        """Free slots to waiting organizations under their share, the fewest held first."""
        while self._free and self._waiting:
            share = -(-self.slots // len(self._held.keys() | self._waiting.keys()))  # an equal share, rounded up
            under_share = [org_id for org_id in self._waiting if self._held[org_id] < share]
            if not under_share:
                return
            org_id = min(under_share, key=self._held.__getitem__)  # the first of the fewest
            queue = self._waiting[org_id]
            turn = queue.popleft()
            if queue:
                self._waiting.move_to_end(org_id)  # its next request waits for every other organization's
            else:
                del self._waiting[org_id]
            if not turn.done():
                self._free -= 1
                self._held[org_id] += 1
                turn.set_result(None)

    def _forget(self, org_id: Hashable, turn: asyncio.Future) -> None:
        queue = self._waiting.get(org_id)
        if queue is not None and turn in queue:
            queue.remove(turn)
            if not queue:
                del self._waiting[org_id]


class Turn:
    """A slot held; given back exactly once."""

    def __init__(self, turns: FairTurns, org_id: Hashable):
        self._turns: FairTurns | None = turns
        self._org_id = org_id

    def release(self) -> None:
        turns, self._turns = self._turns, None
        if turns is not None:
            turns._give_back(self._org_id)
