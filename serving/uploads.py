"""Adapters arrive: a PEFT directory trained elsewhere, uploaded as a `tar.gz`, checked, and
registered as a candidate that goes through the gates and a canary like any other.

An archive is untrusted input. It is read member by member, never extracted as a whole:
only regular files, at the top or in one folder, named as a PEFT LoRA adapter's are (no
paths outside the archive, no links, no pickles: safetensors only), each within its size.
Then the adapter must fit what is served: a LoRA declared for this base model (and, when a
manifest names one, for these very weights), of a rank vLLM is started for, on modules it
may adapt, with tensors the shapes of the base model's. Each refusal is a 400 whose `code`
names the problem. Nothing is imported, no torch either: the checks read headers.
"""

import json
import re
import shutil
import struct
import tarfile
import tempfile
import zlib
from functools import cache
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.db import transaction

from serving.exports import MANIFEST, base_model_fingerprint
from serving.models import AdapterVersion
from serving.registry import adapter_register, base_model_dir
from serving.signals import candidate_uploaded
from tenants.audit import audit_record
from tenants.errors import InvalidInput
from tenants.models import Organization

CONFIG, WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
KiB, MiB = 1024, 1024 * 1024
# Every file an archive may hold, with its largest size; the weights' is the archive's limit.
OPTIONAL_SIZES = {MANIFEST: MiB, "README.md": MiB}
MAX_MEMBERS = 16
PICKLED = {".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz"}
FLOATS = {"F32", "F16", "BF16"}
LORA_TENSOR = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<half>[AB])\.weight$")


class ArchiveRefused(InvalidInput):
    """An uploaded archive that is not an adapter this platform may serve; `code` says why."""

    def __init__(self, code: str, message: str, details=None):
        super().__init__(message, details=details)
        self.code = code


def adapter_upload(*, org: Organization, archive, actor: str) -> tuple[AdapterVersion, str | None]:
    """Check the archive (a binary file object), register its adapter as the organization's next
    candidate, and start the cycle that gates it. Returns the version and that cycle's id."""
    with tempfile.TemporaryDirectory() as work:
        folder = unpacked(archive, Path(work))
        config = checked_config(folder / CONFIG)
        checked_manifest(folder / MANIFEST)
        checked_weights(folder / WEIGHTS, config)
        (folder / MANIFEST).unlink(missing_ok=True)  # the platform writes its own on download
        (folder / "README.md").unlink(missing_ok=True)
        with transaction.atomic():
            adapter = adapter_register(org=org, source_dir=folder, origin=AdapterVersion.Origin.UPLOADED)
            # training starts the gating cycle; Conflict (another cycle is active) undoes the upload
            cycles = [started for _, started in candidate_uploaded.send(sender=AdapterVersion, adapter=adapter, actor=actor)]
            audit_record(org=org, actor=actor, action="adapter.upload", target=adapter.name,
                         after={"rank": config["r"], "target_modules": sorted(config["target_modules"]),
                                "bytes": (folder / WEIGHTS).stat().st_size})
    return adapter, str(cycles[0].pk) if cycles else None


def unpacked(archive, into: Path) -> Path:
    """The archive's files in `into`, after every member's check; the folder they are in."""
    sizes = {CONFIG: 64 * KiB, WEIGHTS: settings.SERVING_ADAPTER_UPLOAD_MAX_BYTES, **OPTIONAL_SIZES}
    try:
        with tarfile.open(fileobj=archive, mode="r:gz") as tar:
            members = _checked_members(tar)
            for info, name in members:
                if name not in sizes:
                    if PurePosixPath(name).suffix.lower() in PICKLED:
                        raise ArchiveRefused("pickle_refused", f"{info.name}: pickled weights are never loaded; upload safetensors.")
                    raise ArchiveRefused("unexpected_file", f"{info.name}: an adapter archive holds only {', '.join(sizes)}.")
                if info.size > sizes[name]:
                    raise ArchiveRefused("file_too_large", f"{info.name} is {info.size:,} bytes; at most {sizes[name]:,}.")
                with tar.extractfile(info) as source, open(into / name, "wb") as target:
                    shutil.copyfileobj(source, target, MiB)  # info.size bytes, checked above
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise ArchiveRefused("not_a_tar_gz", f"The upload is not a readable tar.gz archive: {error}.") from None
    for required in (CONFIG, WEIGHTS):
        if not (into / required).exists():
            raise ArchiveRefused("missing_file", f"The archive has no {required}: it is not a PEFT adapter directory.")
    return into


def _checked_members(tar: tarfile.TarFile) -> list[tuple[tarfile.TarInfo, str]]:
    """Each regular file with its name inside the adapter's folder: all at the archive's top,
    or all in one folder."""
    files = []
    for entries, info in enumerate(tar):  # folders counted too: else 100,000 of them were read, and kept, for free
        if entries >= MAX_MEMBERS:
            raise ArchiveRefused("unexpected_file", f"The archive holds more than {MAX_MEMBERS} files and folders.")
        path = PurePosixPath(info.name)
        if info.name.startswith("/") or "\\" in info.name or ".." in path.parts:
            raise ArchiveRefused("path_outside_archive", f"{info.name}: a path outside the archive.")
        if info.issym() or info.islnk():
            raise ArchiveRefused("link_in_archive", f"{info.name}: links are refused.")
        if info.isdir():
            continue
        if not info.isfile():
            raise ArchiveRefused("unexpected_file", f"{info.name}: not a regular file.")
        files.append((info, path.parts))
    folders = {parts[:-1] for _, parts in files}
    if len(folders) > 1 or any(len(folder) > 1 for folder in folders):
        raise ArchiveRefused("unexpected_file", "The adapter's files must sit at the archive's top, or all in one folder.")
    return [(info, parts[-1]) for info, parts in files]


def checked_config(path: Path) -> dict:
    config = _json(path, "bad_adapter_config")
    limits = {"r": settings.SERVING_VLLM_MAX_LORA_RANK, "target_modules": settings.SERVING_LORA_TARGET_MODULES}
    if config.get("peft_type") != "LORA":
        raise ArchiveRefused("bad_adapter_config", f"peft_type is {config.get('peft_type')!r}: only LORA adapters are served.")
    if config.get("base_model_name_or_path") != settings.SERVING_BASE_MODEL_NAME:
        raise ArchiveRefused("wrong_base_model", f"The adapter was trained on {config.get('base_model_name_or_path')!r}; "
                                                 f"this platform serves {settings.SERVING_BASE_MODEL_NAME!r}.")
    rank = config.get("r")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ArchiveRefused("bad_adapter_config", f"r is {rank!r}: a rank is a whole number from 1.")
    if rank > limits["r"]:
        raise ArchiveRefused("rank_too_high", f"The adapter's rank is {rank}; this platform serves ranks up to {limits['r']}.",
                             details=limits)
    modules = config.get("target_modules")
    if not isinstance(modules, list) or not modules or not all(isinstance(m, str) for m in modules):
        raise ArchiveRefused("bad_adapter_config", "target_modules must be a list of module names (a pattern is not accepted).")
    if not set(modules) <= set(limits["target_modules"]):
        raise ArchiveRefused("target_modules_not_allowed", f"{', '.join(sorted(set(modules) - set(limits['target_modules'])))}: "
                             f"a LoRA here adapts only {', '.join(limits['target_modules'])}.", details=limits)
    for unsupported in ("modules_to_save", "use_dora", "layer_replication"):
        if config.get(unsupported):
            raise ArchiveRefused("bad_adapter_config", f"{unsupported} is not supported by the serving engine.")
    return config


def checked_manifest(path: Path) -> None:
    """A manifest is optional; one that names a base model's fingerprint must name ours."""
    if not path.exists():
        return
    fingerprint = (_json(path, "bad_manifest").get("base_model") or {}).get("fingerprint")
    if fingerprint is not None and fingerprint != base_model_fingerprint():
        raise ArchiveRefused("wrong_base_model", f"The manifest's base model fingerprint {str(fingerprint)[:16]}… is not the "
                                                 f"served base model's: the adapter was trained on other weights.")


def checked_weights(path: Path, config: dict) -> None:
    """Every tensor a LoRA half of a declared module of the base model, of its shape at the
    declared rank; read from the safetensors header alone."""
    tensors = _safetensors_header(path, "bad_safetensors")
    base = base_shapes()
    rank, modules, halves = config["r"], set(config["target_modules"]), set()
    for name, tensor in tensors.items():
        match = LORA_TENSOR.match(name)
        if match is None or match["module"].rsplit(".", 1)[-1] not in modules:
            raise ArchiveRefused("shape_mismatch", f"{name}: not a LoRA tensor of a declared target module.")
        if tensor.get("dtype") not in FLOATS:
            raise ArchiveRefused("bad_safetensors", f"{name}: dtype {tensor.get('dtype')!r}; expected one of {', '.join(sorted(FLOATS))}.")
        weight = base.get(f"{match['module']}.weight")
        if weight is None:
            raise ArchiveRefused("shape_mismatch", f"{name}: the base model has no module {match['module']}.")
        out_features, in_features = weight
        expected = [rank, in_features] if match["half"] == "A" else [out_features, rank]
        if tensor.get("shape") != expected:
            raise ArchiveRefused("shape_mismatch", f"{name} is {tensor.get('shape')}; the base model and rank {rank} "
                                                   f"need {expected}.")
        halves.add((match["module"], match["half"]))
    if not halves or {module for module, _ in halves if (module, "A") not in halves or (module, "B") not in halves}:
        raise ArchiveRefused("shape_mismatch", "Every adapted module needs both lora_A and lora_B, and at least one is needed.")


def base_shapes() -> dict[str, list[int]]:
    """Each 2-D weight of the served base model, with its shape, by name."""
    files = sorted(base_model_dir().glob("*.safetensors"))
    return _shapes(tuple((str(f), f.stat().st_mtime_ns) for f in files))


@cache
def _shapes(files: tuple[tuple[str, int], ...]) -> dict[str, list[int]]:
    shapes = {}
    for path, _ in files:
        for name, tensor in _safetensors_header(Path(path), "bad_base_model").items():
            if len(tensor.get("shape", [])) == 2:
                shapes[name.removeprefix("base_model.model.")] = tensor["shape"]
    return shapes


def _safetensors_header(path: Path, code: str) -> dict[str, dict]:
    """The tensors a safetensors file declares ({name: {dtype, shape, data_offsets}}), checked
    against the file's size: 8 bytes of header length, the JSON header, then the data."""
    size = path.stat().st_size
    with open(path, "rb") as stream:
        raw = stream.read(8)
        length = struct.unpack("<Q", raw)[0] if len(raw) == 8 else -1
        if not 0 < length <= min(size - 8, 16 * MiB):
            raise ArchiveRefused(code, f"{path.name} is not a safetensors file.")
        try:
            header = json.loads(stream.read(length))
        except (ValueError, RecursionError):
            raise ArchiveRefused(code, f"{path.name} has an unreadable safetensors header.") from None
    if not isinstance(header, dict):
        raise ArchiveRefused(code, f"{path.name} has an unreadable safetensors header.")
    header.pop("__metadata__", None)
    data = size - 8 - length
    for name, tensor in header.items():
        offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and 0 <= offsets[0] <= offsets[1] <= data):
            raise ArchiveRefused(code, f"{path.name}: {name}'s data lies outside the file.")
    return header


def _json(path: Path, code: str) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ArchiveRefused(code, f"{path.name} is not valid JSON: {error}.") from None
    except RecursionError:
        raise ArchiveRefused(code, f"{path.name} is nested too deeply.") from None
    if not isinstance(value, dict):
        raise ArchiveRefused(code, f"{path.name} is not a JSON object.")
    return value
