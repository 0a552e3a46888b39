"""Group commit: completions that finish together are recorded in one transaction, each caller
answered only once its own recording is committed. With the gateway killed under traffic:
tests/deploy/test_cluster.py."""

import asyncio
import uuid

import pytest
from django.db import OperationalError

from serving.gateway import recorder as recorder_module
from serving.gateway.protocol import DatabaseUnavailable
from serving.gateway.recorder import GroupRecorder
from tenants.errors import Conflict
from tenants.models import DataKey, Interaction, StorageUsage
from tenants.recording import InteractionContent, Recording, interaction_content
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def recording(org, text: str = "hi") -> Recording:
    return Recording(org=org, content=InteractionContent([{"role": "user", "content": text}], f"answer to {text}"),
                     source=Interaction.Source.GATEWAY, interaction_id=uuid.uuid4(), end_user="jane")


def all_at_once(recordings: list[Recording]) -> list:
    async def record():
        group_recorder = GroupRecorder()
        return await asyncio.gather(*(group_recorder.record(r) for r in recordings), return_exceptions=True)
    return asyncio.run(record())


@pytest.fixture
def groups(monkeypatch) -> list[int]:
    """The size of each group written."""
    sizes, record = [], recorder_module.interactions_record
    monkeypatch.setattr(recorder_module, "interactions_record", lambda recordings: sizes.append(len(recordings)) or record(recordings))
    return sizes


def test_completions_that_finish_together_share_one_transaction_and_each_gets_its_own_record(groups):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    recordings = [recording(org, f"question {n}") for n, org in enumerate([acme.org, globex.org] * 5)]
    stored = all_at_once(recordings)
    assert groups == [10]
    assert [interaction.pk for interaction in stored] == [r.interaction_id for r in recordings]
    for r in recordings:
        interaction = Interaction.objects.for_org(r.org).get(pk=r.interaction_id)
        assert interaction_content(interaction=interaction)["messages"] == r.content.messages
    assert all(StorageUsage.objects.for_org(org).get().used_bytes > 0 for org in (acme.org, globex.org))


def test_one_organizations_failure_is_its_own_and_the_rest_of_its_group_is_stored(groups):
    acme, globex = make_tenant("acme"), make_tenant("globex")
    DataKey.objects.for_org(globex.org).delete()  # being deleted: its keys destroyed
    stored = all_at_once([recording(acme.org), recording(globex.org), recording(acme.org)])
    assert isinstance(stored[1], Conflict) and "destroyed" in stored[1].message
    assert Interaction.objects.for_org(acme.org).count() == 2 and not Interaction.objects.for_org(globex.org).exists()
    assert groups == [3, 1, 1, 1]  # the group, then each alone


def test_the_database_failing_fails_every_caller_of_the_group_cleanly_and_stores_nothing(monkeypatch):
    acme = make_tenant("acme")

    def down(recordings):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(recorder_module, "interactions_record", down)
    stored = all_at_once([recording(acme.org), recording(acme.org)])
    assert all(isinstance(outcome, DatabaseUnavailable) for outcome in stored)
    assert not Interaction.objects.for_org(acme.org).exists()


def test_a_caller_that_goes_away_does_not_stop_its_recording(groups):
    acme = make_tenant("acme")

    async def caller_cancelled():
        group_recorder = GroupRecorder()
        waiting = asyncio.ensure_future(group_recorder.record(recording(acme.org)))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.sleep(0.5)
        while group_recorder._writer is not None and not group_recorder._writer.done():
            await asyncio.sleep(0.05)

    asyncio.run(caller_cancelled())
    assert Interaction.objects.for_org(acme.org).count() == 1
