"""Deploying and rolling back adapter versions on a real vLLM replica, under traffic."""

import threading

import openai
import pytest

from serving import registry, vllm_client
from serving.deployments import ReplicaFailed, adapter_deploy, adapter_rollback
from serving.models import AdapterVersion
from serving.vllm_process import free_port
from tenants.errors import Conflict
from tenants.models import AuditEvent
from tests.serving.gateway_calls import ask, gateway_client
from tests.serving.vllm_server import BASE_NAME

pytestmark = pytest.mark.vllm


def candidate(vllm, org, seed: int) -> AdapterVersion:
    return registry.adapter_register(org=org, source_dir=vllm.trained_adapter(seed))


def served(gateway, tenant) -> str:
    return ask(gateway_client(gateway, tenant.key), max_tokens=2).model


class Traffic:
    """Requests sent back to back from a thread while the test changes routing."""

    def __init__(self, gateway, key):
        self.api = gateway_client(gateway, key, max_retries=0)
        self.models, self.errors = [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.models.append(ask(self.api, max_tokens=2).model)
            except openai.APIError as error:
                self.errors.append(error)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=60)


def test_deploy_and_rollback_switch_what_is_served_without_failed_requests(gateway, acme, vllm):
    first, second = candidate(vllm, acme.org, 1), candidate(vllm, acme.org, 2)
    with Traffic(gateway, acme.key) as traffic:
        adapter_deploy(adapter=first, actor="test")
        assert served(gateway, acme) == first.name
        adapter_deploy(adapter=second, actor="test")
        assert served(gateway, acme) == second.name
        adapter_rollback(org=acme.org, actor="test")
        assert served(gateway, acme) == first.name
        adapter_rollback(org=acme.org, actor="test")
        assert served(gateway, acme) == BASE_NAME
    assert traffic.errors == [] and traffic.models
    assert set(traffic.models) <= {BASE_NAME, first.name, second.name}
    statuses = dict(AdapterVersion.objects.for_org(acme.org).values_list("name", "status"))
    assert statuses == {first.name: "retired", second.name: "retired"}
    actions = list(AuditEvent.objects.for_org(acme.org).filter(action__startswith="adapter.").order_by("at", "pk").values_list("action", flat=True))
    assert actions == ["adapter.deploy", "adapter.deploy", "adapter.rollback", "adapter.rollback"]


def test_the_replaced_version_stays_loaded_and_older_ones_are_unloaded(gateway, acme, vllm):
    versions = [candidate(vllm, acme.org, seed) for seed in (1, 2, 3)]
    for adapter in versions:
        adapter_deploy(adapter=adapter, actor="test")
    loaded = vllm_client.served_models(vllm.url)
    assert {versions[1].name, versions[2].name} <= loaded and versions[0].name not in loaded


def test_a_replica_that_is_down_is_skipped_and_the_live_ones_get_the_version(gateway, acme, vllm, settings):
    old, new = candidate(vllm, acme.org, 1), candidate(vllm, acme.org, 2)
    adapter_deploy(adapter=old, actor="test")
    settings.SERVING_VLLM_URLS = [vllm.url, f"http://127.0.0.1:{free_port()}"]
    adapter_deploy(adapter=new, actor="test")
    assert registry.route_of(org=acme.org).serving == new
    assert served(gateway, acme) == new.name  # the dead replica is out of the gateway's rotation


def test_a_live_replica_refusing_the_version_leaves_routing_on_the_old_one_and_no_replica_with_it(gateway, acme, vllm, settings, monkeypatch):
    old, new = candidate(vllm, acme.org, 1), candidate(vllm, acme.org, 2)
    adapter_deploy(adapter=old, actor="test")
    refusing = "http://127.0.0.1:1"  # answers, but has no room for another adapter
    settings.SERVING_VLLM_URLS = [vllm.url, refusing]
    served_roots, load_adapter = vllm_client.served_roots, vllm_client.load_adapter
    monkeypatch.setattr(vllm_client, "served_roots", lambda url, *a, **k: {} if url == refusing else served_roots(url, *a, **k))

    def load(url, **adapter):
        if url == refusing:
            raise vllm_client.VllmError("HTTP 500 out of memory", status=500, detail="out of memory")
        load_adapter(url, **adapter)

    monkeypatch.setattr(vllm_client, "load_adapter", load)
    with pytest.raises(ReplicaFailed) as failed:
        adapter_deploy(adapter=new, actor="test")
    assert refusing in str(failed.value.details)
    assert registry.route_of(org=acme.org).serving == old
    new.refresh_from_db()
    assert new.status == "candidate"
    assert new.name not in vllm_client.served_models(vllm.url)  # every live replica or none


def test_a_blocked_version_is_never_deployed(gateway, acme, vllm):
    blocked = candidate(vllm, acme.org, 1)
    AdapterVersion.objects.for_org(acme.org).filter(pk=blocked.pk).update(status="blocked")
    blocked.refresh_from_db()
    with pytest.raises(Conflict):
        adapter_deploy(adapter=blocked, actor="test")
    assert served(gateway, acme) == BASE_NAME


def test_the_base_model_cannot_be_rolled_back(gateway, acme):
    with pytest.raises(Conflict, match="nothing to roll back"):
        adapter_rollback(org=acme.org, actor="test")


def test_a_name_left_loaded_by_a_deleted_organization_is_reloaded_with_the_new_files(gateway, acme, vllm):
    stale = vllm.trained_adapter(7)  # a deleted "acme"'s weights, left on a replica that was down
    vllm_client.load_adapter(vllm.url, name="acme@v1", path=stale)
    adapter = candidate(vllm, acme.org, 1)
    adapter_deploy(adapter=adapter, actor="test")
    assert vllm_client.served_roots(vllm.url)["acme@v1"] == str(registry.adapter_files(adapter))


def test_admins_promote_and_roll_back_through_the_api(gateway, acme, vllm):
    version = candidate(vllm, acme.org, 1)
    promoted = acme.client.post(f"/api/v1/adapters/{version.name}/promote")
    assert promoted.status_code == 200, promoted.content
    assert promoted.json() == {"serving": version.name, "canary": None, "canary_share": 0.0}
    assert served(gateway, acme) == version.name

    rolled_back = acme.client.post(f"/api/v1/adapters/{version.name}/rollback")
    assert rolled_back.status_code == 200 and rolled_back.json()["serving"] == BASE_NAME
    assert served(gateway, acme) == BASE_NAME
    assert acme.client.post(f"/api/v1/adapters/{version.name}/rollback").status_code == 409  # no longer serving
    actions = AuditEvent.objects.for_org(acme.org).filter(action__startswith="adapter.").values_list("action", "actor")
    actor = f"key:{acme.key[:12]}"  # the owner's key, by its prefix
    assert sorted(actions) == [("adapter.deploy", actor), ("adapter.rollback", actor)]
