import os

import pytest

from serving import registry
from serving.models import AdapterVersion
from tenants.errors import Conflict, InvalidInput, NotFound
from tests.factories import trained_adapter

pytestmark = pytest.mark.usefixtures("adapters_root")


def test_registered_versions_get_immutable_names_and_their_own_folders(acme, tmp_path, adapters_root):
    first = registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, name="a"))
    second = registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, name="b"), parent=first)
    assert (first.name, second.name) == ("acme@v1", "acme@v2")
    assert first.status == AdapterVersion.Status.CANDIDATE and second.parent == first
    assert (registry.adapter_files(second) / "adapter_model.safetensors").read_bytes() == b"weights"
    assert registry.adapter_files(second).parent == (adapters_root / str(acme.org.pk)).resolve()


def test_an_adapter_of_another_base_model_is_refused(acme, tmp_path):
    with pytest.raises(Conflict, match="trained on 'other-base'"):
        registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, base="other-base"))
    assert not AdapterVersion.objects.for_org(acme.org).exists()


def test_a_folder_without_adapter_config_is_refused(acme, tmp_path):
    with pytest.raises(InvalidInput, match="not a PEFT adapter"):
        registry.adapter_register(org=acme.org, source_dir=tmp_path)


@pytest.mark.parametrize("relative", ["../elsewhere", "/etc", "x/../../.."])
def test_paths_outside_the_adapters_root_are_refused(relative):
    with pytest.raises(InvalidInput, match="outside the adapters root"):
        registry.confined_path(relative)


def test_a_symlink_out_of_the_root_is_refused(adapters_root, tmp_path):
    adapters_root.mkdir(parents=True)
    os.symlink(tmp_path, adapters_root / "escape")
    with pytest.raises(InvalidInput):
        registry.confined_path("escape/x")


def test_a_parent_of_another_organization_is_refused(acme, globex, tmp_path):
    theirs = registry.adapter_register(org=globex.org, source_dir=trained_adapter(tmp_path, name="g"))
    with pytest.raises(NotFound):
        registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, name="a"), parent=theirs)


def test_an_organization_without_adapters_is_routed_to_the_base_model(acme):
    route = registry.route_of(org=acme.org)
    assert route.serving is None and route.canary is None


def test_the_adapters_endpoint_lists_the_organizations_versions(acme, globex, tmp_path):
    registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, name="a"))
    registry.adapter_register(org=globex.org, source_dir=trained_adapter(tmp_path, name="g"))
    listed = acme.client.get("/api/v1/adapters").json()
    assert [(a["name"], a["status"]) for a in listed] == [("acme@v1", "candidate")]
    assert set(listed[0]) >= {"name", "status", "created_at", "gate_report"}


def test_deleting_an_organization_deletes_its_adapters_and_their_files(acme, globex, tmp_path):
    from tenants.organizations import org_delete

    mine = registry.adapter_register(org=acme.org, source_dir=trained_adapter(tmp_path, name="a"))
    theirs = registry.adapter_register(org=globex.org, source_dir=trained_adapter(tmp_path, name="g"))
    route = registry.route_of(org=acme.org)
    route.serving = mine
    route.save()
    folder = registry.adapter_files(mine)
    org_delete(org=acme.org, confirm_slug=acme.org.slug)
    assert not folder.exists() and not folder.parent.exists()
    assert not AdapterVersion.objects.across_orgs().filter(pk=mine.pk).exists()
    assert registry.adapter_files(theirs).exists()
