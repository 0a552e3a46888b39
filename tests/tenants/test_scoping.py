import pytest

from tenants.models import ApiKey, FeedbackEvent, Interaction
from tenants.scoping import UnscopedQueryError
from tests.factories import record


@pytest.mark.parametrize("query", [
    lambda: list(Interaction.objects.all()),
    lambda: Interaction.objects.filter(adapter="x").count(),
    lambda: Interaction.objects.get(pk="00000000-0000-0000-0000-000000000000"),
    lambda: FeedbackEvent.objects.exists(),
    lambda: ApiKey.objects.update(name="x"),
    lambda: Interaction.objects.for_org(None),
    lambda: Interaction.objects.create(source="api"),
])
def test_a_query_of_tenant_data_without_an_organization_raises(db, query):
    with pytest.raises(UnscopedQueryError):
        query()


def test_a_scoped_query_sees_only_its_organization(acme, globex):
    mine, theirs = record(acme.client), record(globex.client)
    assert [str(pk) for pk in Interaction.objects.for_org(acme.org).values_list("pk", flat=True)] == [mine]
    assert not Interaction.objects.for_org(acme.org).filter(pk=theirs).exists()


def test_reverse_relations_of_a_scoped_object_work(acme):
    interaction = Interaction.objects.for_org(acme.org).get(pk=record(acme.client))
    assert interaction.feedback_events.count() == 0
