"""Fair turns at the model servers: a burst waits behind its own requests, not others'."""

import asyncio

import pytest

from serving.gateway.turns import FairTurns, TurnTimeout


async def _serve(turns: FairTurns, org: str, name: str, served: list[str], gate: asyncio.Event) -> None:
    turn = await turns.take(org, timeout_s=10)
    served.append(name)
    await gate.wait()
    turn.release()


def test_a_burst_waits_behind_its_own_requests_not_in_front_of_another_organizations():
    async def scenario() -> list[str]:
        turns, served, gates = FairTurns(slots=1), [], {}

        def start(org: str, name: str) -> asyncio.Task:
            gates[name] = asyncio.Event()
            return asyncio.create_task(_serve(turns, org, name, served, gates[name]))

        tasks = [start("flood", f"flood-{i}") for i in range(6)]
        await asyncio.sleep(0)
        tasks.append(start("quiet", "quiet-0"))
        await asyncio.sleep(0)
        assert turns.waiting == 6
        while len(served) < 7:
            gates[served[-1]].set()  # the request being served finishes, the next one gets its turn
            await asyncio.sleep(0.01)
        gates[served[-1]].set()
        await asyncio.gather(*tasks)
        return served

    served = asyncio.run(scenario())
    # Behind the flood's one in service and one turn of it: when that one ends, neither holds a
    # slot and the flood waited first; then the quiet one's turn in the round.
    assert served.index("quiet-0") == 2, served
    assert [name for name in served if name.startswith("flood")] == [f"flood-{i}" for i in range(6)]


def test_a_free_slot_goes_to_the_waiting_organization_holding_the_fewest():
    """A flood holding every slot but one does not get the next before a quieter organization
    that waited less, and among organizations holding as many, the round goes on."""
    async def scenario() -> list[str]:
        turns, served, gates = FairTurns(slots=3), [], {}

        def start(org: str, name: str) -> asyncio.Task:
            gates[name] = asyncio.Event()
            return asyncio.create_task(_serve(turns, org, name, served, gates[name]))

        tasks = [start("flood", f"flood-{i}") for i in range(5)]  # 3 served, 2 waiting
        await asyncio.sleep(0)
        tasks.append(start("quiet", "quiet-0"))
        await asyncio.sleep(0)
        gates["flood-0"].set()  # flood holds 2, quiet 0: quiet's turn
        await asyncio.sleep(0.01)
        tasks.append(start("quiet", "quiet-1"))
        await asyncio.sleep(0)
        gates["flood-1"].set()  # flood holds 1, quiet 1: the round goes on, flood waited first
        await asyncio.sleep(0.01)
        gates["flood-2"].set()  # flood holds 1 (flood-3), quiet 1: quiet's turn in the round
        await asyncio.sleep(0.01)
        for gate in gates.values():
            gate.set()
        await asyncio.gather(*tasks)
        return served

    served = asyncio.run(scenario())
    assert served[:6] == ["flood-0", "flood-1", "flood-2", "quiet-0", "flood-3", "quiet-1"], served


def test_beside_another_organization_a_flood_holds_at_most_an_equal_share():
    """A quiet organization with two calls at a time gets its share as the flood's end, and the
    slot its finished call gives back waits for its next one instead of going to the flood; once
    it is gone, the flood has every slot again."""
    async def scenario() -> None:
        turns = FairTurns(slots=4)
        flood = [await turns.take("flood", timeout_s=0.01) for _ in range(4)]  # alone: every slot
        flood_waiting = [asyncio.create_task(turns.take("flood", timeout_s=10)) for _ in range(8)]
        quiet_waiting = [asyncio.create_task(turns.take("quiet", timeout_s=10)) for _ in range(2)]
        await asyncio.sleep(0.01)
        flood.pop().release()
        flood.pop().release()
        await asyncio.sleep(0.01)
        quiet = [await task for task in quiet_waiting]  # the flood held 2 of 4: its share beside one other
        assert not any(task.done() for task in flood_waiting)
        quiet.pop().release()  # a quiet call ends: the slot stays free for its next one
        await asyncio.sleep(0.01)
        assert not any(task.done() for task in flood_waiting)
        quiet.append(await turns.take("quiet", timeout_s=0.01))
        for turn in quiet:
            turn.release()  # the quiet organization is done
        await asyncio.sleep(0.01)
        assert sum(task.done() for task in flood_waiting) == 2  # the flood alone again: all 4 slots
        for turn in flood:
            turn.release()
        for task in flood_waiting:
            (await task).release()
        assert turns.waiting == 0 and turns._free == 4

    asyncio.run(scenario())


def test_a_request_that_gives_up_waiting_leaves_no_slot_taken():
    async def scenario() -> None:
        turns = FairTurns(slots=1)
        held = await turns.take("acme", timeout_s=1)
        with pytest.raises(TurnTimeout):
            await turns.take("acme", timeout_s=0.05)
        waiting = asyncio.create_task(turns.take("globex", timeout_s=10))
        await asyncio.sleep(0)
        waiting.cancel()  # its client went away
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert turns.waiting == 0
        held.release()
        held.release()  # a second release gives nothing back
        first = await turns.take("acme", timeout_s=0.05)
        with pytest.raises(TurnTimeout):
            await turns.take("globex", timeout_s=0.05)
        first.release()

    asyncio.run(scenario())


def test_free_slots_are_taken_at_once():
    async def scenario() -> None:
        turns = FairTurns(slots=3)
        held = [await turns.take("acme", timeout_s=0.01) for _ in range(3)]
        with pytest.raises(TurnTimeout):
            await turns.take("acme", timeout_s=0.01)
        for turn in held:
            turn.release()
        await turns.take("globex", timeout_s=0.01)

    asyncio.run(scenario())
