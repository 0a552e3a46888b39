"""Adapters leave as PEFT archives with a manifest, and arrive as candidates after checks.

Real PEFT adapters for the tiny base model; the upload's gating cycle runs with the gates'
verdict given (as in tests/training/test_cycles.py). Loading a download into a fresh vLLM is
in test_adapter_archives_vllm.py.
"""

import io
import json
import struct
import tarfile
from pathlib import Path

import pytest
import torch
from django.utils import timezone
from transformers import AutoModelForCausalLM

from serving import exports
from serving.models import AdapterVersion
from serving.registry import adapter_register
from tenants import transactions
from tests.factories import make_tenant
from tests.serving.adapters import random_lora
from tests.training.test_cycles import gate_verdict, replicas  # noqa: F401 - fixtures
from training import cycles
from training.models import Cycle, TrainingRun

URL = "/api/v1/adapters"


@pytest.fixture
def lora(tiny_base_model, tmp_path_factory) -> Path:
    return random_lora(tiny_base_model, tmp_path_factory.mktemp("lora") / "adapter", seed=3, base_name="demo-base")


@pytest.fixture
def platform(adapters_root, settings, tiny_base_model, monkeypatch):
    """Adapters for the tiny base model, under this test's root; cycles' tasks not sent."""
    settings.SERVING_BASE_MODEL_DIR = str(tiny_base_model)
    monkeypatch.setattr(transactions, "send", lambda task, object_id: None)
    return settings


@pytest.fixture
def version(acme, platform, lora) -> AdapterVersion:
    return adapter_register(org=acme.org, source_dir=lora, dataset_sha256="d" * 64, reward_spec_version=2)


def members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


def tar_gz(files: dict[str, bytes], *, links: dict[str, str] | None = None, folders: int = 0) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for number in range(folders):
            info = tarfile.TarInfo(f"folder-{number}")
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return out.getvalue()


def peft_files(lora: Path, **config_changes) -> dict[str, bytes]:
    config = {**json.loads((lora / "adapter_config.json").read_text()), **config_changes}
    return {"adapter_config.json": json.dumps(config).encode(),
            "adapter_model.safetensors": (lora / "adapter_model.safetensors").read_bytes()}


def upload(client, archive: bytes):
    return client.post(URL, {"archive": io.BytesIO(archive)}, format="multipart")


# Download -----------------------------------------------------------------------------------


def test_a_download_is_the_peft_directory_with_its_manifest(acme, version, lora):
    response = acme.client.get(f"{URL}/{version.name}/download")
    assert response.status_code == 200 and response["Content-Type"] == "application/gzip"
    assert 'filename="acme-v1.tar.gz"' in response["Content-Disposition"]
    archive = b"".join(response.streaming_content)
    files = members(archive)
    assert set(files) == {f"acme-v1/{path.name}" for path in lora.iterdir()} | {"acme-v1/manifest.json"}  # as peft saved it
    assert files["acme-v1/adapter_model.safetensors"] == (lora / "adapter_model.safetensors").read_bytes()
    manifest = json.loads(files["acme-v1/manifest.json"])
    assert manifest["adapter"] == "acme@v1" and manifest["parent"] is None and manifest["origin"] == "trained"
    assert manifest["base_model"] == {"name": "demo-base", "fingerprint": exports.base_model_fingerprint()}
    assert manifest["dataset"] == {"sha256": "d" * 64, "interactions": 0} and manifest["reward_spec_version"] == 2
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(manifest["files"])
    again = b"".join(acme.client.get(f"{URL}/{version.name}/download").streaming_content)
    assert again == archive  # the same version, the same bytes


def test_peft_loads_a_download_as_the_platform_serves_it(acme, version, tmp_path, tiny_base_model):
    from peft import PeftModel

    with tarfile.open(fileobj=io.BytesIO(b"".join(acme.client.get(f"{URL}/{version.name}/download").streaming_content))) as tar:
        tar.extractall(tmp_path, filter="data")
    prompt = torch.tensor([[1, 5, 9, 13, 2]])
    downloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_base_model), tmp_path / "acme-v1")
    served = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_base_model), exports.adapter_files(version))
    base = AutoModelForCausalLM.from_pretrained(tiny_base_model)
    with torch.no_grad():
        logits = [model(prompt).logits for model in (downloaded, served, base)]
    assert torch.equal(logits[0], logits[1]) and not torch.allclose(logits[0], logits[2])


def test_downloads_are_for_admins_and_this_organizations_versions_only(acme, version, viewer):
    globex = make_tenant("Globex")
    assert viewer.get(f"{URL}/{version.name}/download").status_code == 403
    assert globex.client.get(f"{URL}/{version.name}/download").status_code == 404
    assert globex.client_with_role("viewer").get(f"{URL}/{version.name}/download").status_code == 404


def test_a_name_with_a_nul_is_no_version_of_any_organization(acme, version):
    """PostgreSQL refuses a NUL in a query: it was a 500 there."""
    for path in ("download", "promote", "rollback"):
        method = acme.client.get if path == "download" else acme.client.post
        assert method(f"{URL}/{version.name}%00/{path}").status_code == 404


def test_a_version_whose_weights_erasure_deleted_cannot_be_downloaded(acme, version):
    AdapterVersion.objects.for_org(acme.org).filter(pk=version.pk).update(tainted_at=timezone.now(), taint={"erased": 1},
                                                                         weights_deleted_at=timezone.now())
    response = acme.client.get(f"{URL}/{version.name}/download")
    assert response.status_code == 409 and "deleted" in response.json()["error"]["message"]


# Upload -------------------------------------------------------------------------------------


def test_a_good_archive_becomes_a_candidate_and_is_gated(acme, version, platform, replicas, monkeypatch):  # noqa: F811
    downloaded = b"".join(acme.client.get(f"{URL}/{version.name}/download").streaming_content)
    globex = make_tenant("Globex")
    response = upload(globex.client, downloaded)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["adapter"]["name"] == "globex@v1" and body["adapter"]["status"] == "candidate"
    assert body["adapter"]["origin"] == "uploaded" and body["adapter"]["parent"] is None
    uploaded = AdapterVersion.objects.for_org(globex.org).get()
    assert (exports.adapter_files(uploaded) / "adapter_model.safetensors").read_bytes() == \
        (exports.adapter_files(version) / "adapter_model.safetensors").read_bytes()
    assert not (exports.adapter_files(uploaded) / "manifest.json").exists()
    assert globex.org.audit_events.get(action="adapter.upload").after["rank"] == 8

    cycle = Cycle.objects.for_org(globex.org).get(pk=body["cycle"])
    assert (cycle.status, cycle.trigger, cycle.candidate) == (Cycle.Status.GATING, TrainingRun.Trigger.UPLOAD, uploaded)
    gate_verdict(monkeypatch)
    assert cycles.cycle_advance(str(cycle.pk)).status == Cycle.Status.CANARY  # through the gates like any candidate


def test_an_upload_waits_for_the_active_cycle(acme, version, lora):
    cycles.cycle_request(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, actor="test")
    response = upload(acme.client, tar_gz(peft_files(lora)))
    assert response.status_code == 409 and "already active" in response.json()["error"]["message"]
    assert AdapterVersion.objects.for_org(acme.org).count() == 1


def test_uploads_are_for_admins(acme, platform, lora, viewer):
    assert upload(viewer, tar_gz(peft_files(lora))).status_code == 403
    assert not AdapterVersion.objects.for_org(acme.org).exists()


def test_files_in_one_folder_or_at_the_top_are_both_accepted(acme, platform, lora):
    assert upload(acme.client, tar_gz({f"mine/{n}": c for n, c in peft_files(lora).items()})).status_code == 201


@pytest.mark.parametrize("case, code", [
    ("traversal", "path_outside_archive"),
    ("absolute", "path_outside_archive"),
    ("symlink", "link_in_archive"),
    ("pickle", "pickle_refused"),
    ("wrong_base", "wrong_base_model"),
    ("wrong_fingerprint", "wrong_base_model"),
    ("oversize", "file_too_large"),
    ("rank", "rank_too_high"),
    ("modules", "target_modules_not_allowed"),
    ("not_gzip", "not_a_tar_gz"),
    ("no_weights", "missing_file"),
    ("two_folders", "unexpected_file"),
    ("shapes", "shape_mismatch"),
    ("truncated", "bad_safetensors"),
    ("deep_config", "bad_adapter_config"),
    ("deep_header", "bad_safetensors"),
    ("folders", "unexpected_file"),
])
def test_bad_archives_are_refused_with_the_problem_named(acme, platform, lora, tiny_base_model, tmp_path, settings, case, code):
    good = peft_files(lora)
    weights = good["adapter_model.safetensors"]
    archives = {
        "traversal": lambda: tar_gz({**good, "../../evil.json": b"{}"}),
        "absolute": lambda: tar_gz({**good, "/etc/cron.d/evil": b"x"}),
        "symlink": lambda: tar_gz(good, links={"adapter_model.safetensors.link": "/etc/passwd"}),
        "pickle": lambda: tar_gz({"adapter_config.json": good["adapter_config.json"], "adapter_model.bin": b"\x80\x04K."}),
        "wrong_base": lambda: tar_gz(peft_files(lora, base_model_name_or_path="Qwen/Qwen2.5-0.5B")),
        "wrong_fingerprint": lambda: tar_gz({**good, "manifest.json": json.dumps({"base_model": {"fingerprint": "0" * 64}}).encode()}),
        "oversize": lambda: tar_gz(good),
        "rank": lambda: tar_gz(peft_files(lora, r=64)),
        "modules": lambda: tar_gz(peft_files(lora, target_modules=["q_proj", "lm_head"])),
        "not_gzip": lambda: b"PK\x03\x04 a zip file",
        "no_weights": lambda: tar_gz({"adapter_config.json": good["adapter_config.json"]}),
        "two_folders": lambda: tar_gz({"a/adapter_config.json": good["adapter_config.json"], "b/adapter_model.safetensors": weights}),
        "shapes": lambda: tar_gz(peft_files(lora, r=4)),  # declares rank 4, holds rank-8 tensors
        "truncated": lambda: tar_gz({**good, "adapter_model.safetensors": weights[:200]}),
        # nested past the parser's recursion: a 500 before
        "deep_config": lambda: tar_gz({**good, "adapter_config.json": b"[" * 60_000}),
        "deep_header": lambda: tar_gz({**good, "adapter_model.safetensors": struct.pack("<Q", 60_000) + b"[" * 60_000 + b"\0" * 8}),
        "folders": lambda: tar_gz(good, folders=100),  # read and kept, every one, before they counted
    }
    if case == "oversize":
        settings.SERVING_ADAPTER_UPLOAD_MAX_BYTES = len(weights) - 1
    response = upload(acme.client, archives[case]())
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["code"] == code, response.json()
    assert not AdapterVersion.objects.for_org(acme.org).exists()
    assert not list(Path(platform.SERVING_ADAPTERS_ROOT).glob("*/v*"))
