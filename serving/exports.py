"""Adapters leave as PEFT directories: a version's files in a `tar.gz`, with a manifest.

The archive holds one folder, `<org>-v<N>/`, with the version's files exactly as vLLM loads
them (`adapter_config.json`, `adapter_model.safetensors`) and `manifest.json`: what it was
trained on and from (base model and its fingerprint, parent, dataset lineage hash, reward spec
version), its gate report and any taint. `peft.PeftModel.from_pretrained` and vLLM's
`--lora-modules` load the folder as it is. The same version always gives the same bytes.
"""

import gzip
import hashlib
import io
import json
import tarfile
import tempfile
from functools import cache
from pathlib import Path

from serving.models import AdapterVersion
from serving.registry import adapter_files, base_model_dir
from tenants.errors import Conflict

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "orgspec-adapter/1"
SPOOL_BYTES = 16 * 1024 * 1024  # archives larger than this are built on disk, not in memory


def base_model_fingerprint() -> str:
    """sha256 over the served base model's config and weights: an adapter's manifest names the
    very weights it was trained on, and an upload is checked against them."""
    folder = base_model_dir()
    files = sorted([folder / "config.json", *folder.glob("*.safetensors")])
    return _fingerprint(tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files))


@cache
def _fingerprint(files: tuple[tuple[str, int, int], ...]) -> str:
    """Keyed by each file's size and time, so a base model changed in place is hashed again."""
    digest = hashlib.sha256()
    for path, _, _ in files:
        digest.update(Path(path).name.encode() + b"\0")
        with open(path, "rb") as stream:
            while chunk := stream.read(1024 * 1024):
                digest.update(chunk)
    return digest.hexdigest()


def archive_name(adapter: AdapterVersion) -> str:
    return f"{adapter.org.slug}-v{adapter.version}"


def adapter_manifest(adapter: AdapterVersion, files: dict[str, bytes]) -> dict:
    return {
        "format": MANIFEST_FORMAT,
        "adapter": adapter.name,
        "origin": adapter.origin,
        "base_model": {"name": adapter.base_model, "fingerprint": base_model_fingerprint()},
        "parent": adapter.parent.name if adapter.parent else None,
        "dataset": {"sha256": adapter.dataset_sha256 or None, "interactions": adapter.trained_on.count()},
        "reward_spec_version": adapter.reward_spec_version,
        "gate_report": adapter.gate_report,
        "taint": adapter.taint,
        "created_at": adapter.created_at.isoformat(),
        "files": {name: hashlib.sha256(content).hexdigest() for name, content in files.items()},
    }


def adapter_archive(adapter: AdapterVersion):
    """The version as a `tar.gz` file object, at its start; Conflict if its weights were deleted."""
    if adapter.weights_deleted_at is not None:
        raise Conflict(f"{adapter.name}'s weights were deleted: erasure reached its training data.")
    folder = adapter_files(adapter)
    files = {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}
    files[MANIFEST] = json.dumps(adapter_manifest(adapter, files), indent=2, sort_keys=True).encode()
    out = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    stamp = int(adapter.created_at.timestamp())
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=stamp) as zipped, tarfile.open(fileobj=zipped, mode="w") as tar:
        top = archive_name(adapter)
        tar.addfile(_entry(f"{top}/", stamp, directory=True))
        for name, content in files.items():
            tar.addfile(_entry(f"{top}/{name}", stamp, size=len(content)), io.BytesIO(content))
    out.seek(0)
    return out


def _entry(name: str, stamp: int, *, size: int = 0, directory: bool = False) -> tarfile.TarInfo:
    """A member owned by no one in particular, at the version's time: the bytes depend on the
    version alone."""
    info = tarfile.TarInfo(name)
    info.type, info.mode = (tarfile.DIRTYPE, 0o755) if directory else (tarfile.REGTYPE, 0o644)
    info.size, info.mtime, info.uid, info.gid, info.uname, info.gname = size, stamp, 0, 0, "", ""
    return info
