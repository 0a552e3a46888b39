"""Adapters in and out: a demo adapter's download (size, time) and an upload's checks (time).

    .venv/bin/python benchmarks/adapter_portability.py [--requests 30] [--json]

The adapter is the training engine's own (its default LoRA: rank 8 on every attention and MLP
projection) on the demo's base model, with random weights, registered for one organization.
Requests go through the whole Django stack in process (the test client, no sockets):

- download: `GET /api/v1/adapters/<name>/download`, bytes and time, against copying the
  version's files (what any export must read) in the same run;
- upload: the archive's checks alone (read member by member, config, manifest, tensor shapes
  against the base model's), against gunzip-and-untar of the same archive with `tarfile`; and
  the whole `POST /api/v1/adapters` (checks, registration, its cycle), with the version and
  cycle it made removed after each one.
"""

import argparse
import io
import json
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

import _django

_django.setup(env={**_django.serving_env("portability"), "PLATFORM_BASE_MODEL_DIR": str(_django.demo_base_model())})

from django.test import Client  # noqa: E402

from serving import uploads  # noqa: E402
from serving.models import AdapterVersion  # noqa: E402
from serving.registry import adapter_files, adapter_register, base_model_dir  # noqa: E402
from tenants import transactions  # noqa: E402
from tenants.organizations import org_create  # noqa: E402
from training.models import Cycle  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    transactions.send = lambda task, object_id: None  # no broker here: the upload's cycle is created, not run

    org, key = org_create(name=f"bench-{uuid.uuid4().hex[:6]}", owner_email="owner@bench.example")
    adapter = adapter_register(org=org, source_dir=engine_adapter(Path(_django.throwaway_dir())))
    client = Client(headers={"Authorization": f"Bearer {key}"})

    def download() -> bytes:
        return b"".join(client.get(f"/api/v1/adapters/{adapter.name}/download").streaming_content)

    archive = download()
    copy_target = Path(_django.throwaway_dir())
    figures = {
        "adapter_bytes": sum(f.stat().st_size for f in adapter_files(adapter).iterdir()),
        "archive_bytes": len(archive),
        "download_ms": timed(download, args.requests),
        "copy_files_ms": timed(lambda: shutil.copytree(adapter_files(adapter), copy_target / uuid.uuid4().hex), args.requests),
        "check_ms": timed(lambda: checked(archive), args.requests),
        "untar_ms": timed(lambda: untarred(archive), args.requests),
        "upload_ms": timed(lambda: uploaded(client, org, archive), args.requests),
    }
    figures["download_vs_copy"] = round(figures["download_ms"] / figures["copy_files_ms"], 2)
    figures["check_vs_untar"] = round(figures["check_ms"] / figures["untar_ms"], 2)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"demo adapter: {figures['adapter_bytes']:,} bytes of files, archive {figures['archive_bytes']:,} bytes")
    print(f"download   {figures['download_ms']:.1f} ms (copying its files: {figures['copy_files_ms']:.1f} ms, "
          f"{figures['download_vs_copy']}x)")
    print(f"checks     {figures['check_ms']:.1f} ms (untarring the archive: {figures['untar_ms']:.1f} ms, {figures['check_vs_untar']}x)")
    print(f"upload     {figures['upload_ms']:.1f} ms, the whole POST: checks, registration and its cycle")


def engine_adapter(folder: Path) -> Path:
    """The engine's default LoRA on the demo base model, its B matrices random (as trained)."""
    import torch
    from django.conf import settings
    from peft import LoraConfig, get_peft_model

    from training.engine.config import TrainConfig
    from training.engine.policy import load_base

    config = TrainConfig()
    model = get_peft_model(load_base(base_model_dir()), LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha,
                                                                   target_modules=list(config.target_modules)))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.01)
    model.peft_config["default"].base_model_name_or_path = settings.SERVING_BASE_MODEL_NAME
    model.save_pretrained(folder)
    return folder


def checked(archive: bytes) -> None:
    with tempfile.TemporaryDirectory() as work:
        folder = uploads.unpacked(io.BytesIO(archive), Path(work))
        config = uploads.checked_config(folder / uploads.CONFIG)
        uploads.checked_manifest(folder / "manifest.json")
        uploads.checked_weights(folder / uploads.WEIGHTS, config)


def untarred(archive: bytes) -> None:
    with tempfile.TemporaryDirectory() as work, tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(work, filter="data")


def uploaded(client: Client, org, archive: bytes) -> None:
    response = client.post("/api/v1/adapters", {"archive": io.BytesIO(archive)})
    assert response.status_code == 201, response.content
    made = response.json()
    Cycle.objects.for_org(org).filter(pk=made["cycle"]).delete()
    version = AdapterVersion.objects.for_org(org).get(name=made["adapter"]["name"])
    shutil.rmtree(adapter_files(version))
    version.delete()


def timed(call, n: int) -> float:
    call()  # warm: caches (the base model's fingerprint and shapes), imports
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


if __name__ == "__main__":
    sys.exit(main())
