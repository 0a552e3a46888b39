"""Group commit for the gateway's recordings: every completion is committed before it is
answered, and the completions that finish together share one transaction.

While one group is written (on a database thread), the next gathers; each caller waits for the
commit of the group its recording is in. Alone, a completion is written at once; under load a
group holds many, and what a transaction costs besides its rows (beginning it, each policy's
share lock, each storage row's update, the commit) is paid once for all of them. An answer
leaves only after its commit, so no crash can lose an interaction that was answered.
"""

import asyncio
import logging

from django.db import InterfaceError, OperationalError

from serving.gateway.database import in_db_thread
from tenants.models import Interaction
from tenants.recording import Recording, interactions_record

log = logging.getLogger(__name__)

MOST_IN_A_GROUP = 64


class GroupRecorder:
    """Touched only from the gateway's event loop (so it needs no lock)."""

    def __init__(self):
        self._waiting: list[tuple[Recording, asyncio.Future]] = []
        self._writer: asyncio.Task | None = None

    async def record(self, recording: Recording) -> Interaction:
        """Stored and committed, or the error that kept it from being (nothing of it stored).
        A caller cancelled meanwhile (its client went away) does not cancel the write."""
        loop = asyncio.get_running_loop()
        committed = loop.create_future()
        committed.add_done_callback(lambda done: done.cancelled() or done.exception())  # read even if the caller went
        self._waiting.append((recording, committed))
        if self._writer is None or self._writer.done() or self._writer.get_loop() is not loop:
            self._writer = loop.create_task(self._write_while_waiting())
        return await asyncio.shield(committed)

    async def _write_while_waiting(self) -> None:
        while self._waiting:
            group, self._waiting = self._waiting[:MOST_IN_A_GROUP], self._waiting[MOST_IN_A_GROUP:]
            try:
                stored = await in_db_thread(_write, [recording for recording, _ in group])
            except Exception as error:
                stored = [error] * len(group)
            for (_, committed), outcome in zip(group, stored):
                if committed.done():
                    continue
                if isinstance(outcome, Exception):
                    committed.set_exception(outcome)
                else:
                    committed.set_result(outcome)


def _write(recordings: list[Recording]) -> list[Interaction | Exception]:
    """One transaction for all; if it fails for something else than the database, each again on
    its own, so that one organization's trouble (its keys being destroyed, say) is its alone."""
    try:
        return interactions_record(recordings)
    except (OperationalError, InterfaceError):
        raise
    except Exception:
        if len(recordings) == 1:
            raise
        log.exception("A group of %d recordings failed; recording each on its own", len(recordings))
    outcomes: list[Interaction | Exception] = []
    for recording in recordings:
        try:
            outcomes.append(interactions_record([recording])[0])
        except (OperationalError, InterfaceError):
            raise
        except Exception as error:
            outcomes.append(error)
    return outcomes
