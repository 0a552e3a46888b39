"""Which model serves a request: the route, canary stickiness, and nothing of another organization."""

import pytest

from serving import registry
from serving.models import AdapterVersion
from serving.routing import base_target, in_canary, target_resolve
from tenants.errors import NotFound
from tests.factories import trained_adapter

pytestmark = pytest.mark.usefixtures("adapters_root")


def adapter(org, tmp_path, status, name) -> AdapterVersion:
    version = registry.adapter_register(org=org, source_dir=trained_adapter(tmp_path, name=name))
    AdapterVersion.objects.for_org(org).filter(pk=version.pk).update(status=status)
    version.refresh_from_db()
    return version


def test_an_organization_without_a_route_gets_the_base_model(acme):
    assert target_resolve(org=acme.org, model="default", end_user=None) == base_target()


def test_default_is_the_routed_version_and_the_canary_takes_its_share(acme, tmp_path):
    serving = adapter(acme.org, tmp_path, "serving", "a")
    canary = adapter(acme.org, tmp_path, "canary", "b")
    route = registry.route_of(org=acme.org)
    route.serving, route.canary, route.canary_share = serving, canary, 0.3
    route.save()
    names = [target_resolve(org=acme.org, model="default", end_user=f"user-{i}").name for i in range(400)]
    assert set(names) == {serving.name, canary.name}
    assert 0.2 < names.count(canary.name) / len(names) < 0.4
    again = [target_resolve(org=acme.org, model="default", end_user=f"user-{i}").name for i in range(400)]
    assert again == names  # sticky per end user


def test_canary_assignment_grows_with_the_share_without_moving_users_back():
    users = [f"user-{i}" for i in range(200)]
    small = {u for u in users if in_canary(canary="acme@v2", end_user=u, share=0.1)}
    large = {u for u in users if in_canary(canary="acme@v2", end_user=u, share=0.5)}
    assert small < large


def test_each_canary_draws_its_own_users():
    users = [f"user-{i}" for i in range(200)]
    first = {u for u in users if in_canary(canary="acme@v2", end_user=u, share=0.5)}
    second = {u for u in users if in_canary(canary="acme@v3", end_user=u, share=0.5)}
    assert 0.3 < len(first & second) / len(first) < 0.7  # about half of one canary's users are in the next


@pytest.mark.parametrize("status", ["candidate", "blocked", "retired"])
def test_a_version_that_is_not_deployed_cannot_be_named(acme, tmp_path, status):
    version = adapter(acme.org, tmp_path, status, "a")
    with pytest.raises(NotFound):
        target_resolve(org=acme.org, model=version.name, end_user=None)


def test_another_organizations_adapter_cannot_be_named(acme, globex, tmp_path):
    theirs = adapter(globex.org, tmp_path, "serving", "g")
    with pytest.raises(NotFound):
        target_resolve(org=acme.org, model=theirs.name, end_user=None)
    assert target_resolve(org=globex.org, model=theirs.name, end_user=None).name == theirs.name
