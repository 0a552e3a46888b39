"""The adapter registry: adapter versions per organization, their files, and their routes.

Files live under one root (SERVING_ADAPTERS_ROOT), at `<org id>/v<N>`; a path is resolved
(symlinks included) and must stay under the root, so neither a client nor a corrupt row can
point vLLM at another organization's adapter or anywhere else on disk. A registered version
is never rewritten: a new set of weights is a new version with a new name.
"""

import json
import os
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from serving import taint
from serving.models import AdapterVersion, Route, TrainedOn
from tenants.errors import Conflict, InvalidInput, NotFound
from tenants.models import Organization
from tenants.storage import storage_lock
from tenants.transactions import retried_on_integrity_error


def base_model_dir() -> Path:
    """The served base model's directory: SERVING_BASE_MODEL_DIR, or the provider's (the embedded
    default builds its own on first use)."""
    if settings.SERVING_BASE_MODEL_DIR:
        return Path(settings.SERVING_BASE_MODEL_DIR)
    return Path(import_string(settings.SERVING_BASE_MODEL_PROVIDER)(Path(settings.DATA_DIR)))


def adapters_root() -> Path:
    return Path(settings.SERVING_ADAPTERS_ROOT).resolve()


def confined_path(relative: str) -> Path:
    """The absolute path of an adapter's folder, refusing anything outside the root."""
    root = adapters_root()
    path = (root / relative).resolve()
    if os.path.commonpath([root, path]) != str(root) or path == root:
        raise InvalidInput(f"Adapter path {relative!r} is outside the adapters root.")
    return path


def adapter_base_model(source_dir: Path) -> str:
    """The base model an adapter directory declares (peft's adapter_config.json)."""
    try:
        config = json.loads((source_dir / "adapter_config.json").read_text())
    except (OSError, ValueError) as error:
        raise InvalidInput(f"{source_dir} is not a PEFT adapter directory: {error}") from None
    base = config.get("base_model_name_or_path")
    if not isinstance(base, str) or not base:
        raise InvalidInput(f"{source_dir}/adapter_config.json names no base model.")
    return base


def adapter_register(*, org: Organization, source_dir: Path, parent: AdapterVersion | None = None,
                     dataset_sha256: str = "", interaction_ids: list[str] = (), reward_spec_version: int | None = None,
                     origin: str = AdapterVersion.Origin.TRAINED) -> AdapterVersion:
    """Copy a trained adapter under the root as the organization's next version, a candidate,
    with its lineage: the interactions it was trained on (`TrainedOn`), and its taint if erasure
    reached them, or its parent, meanwhile (serving/taint.py).

    Refused when it was trained on another base model than the one served: vLLM would load
    it and serve nonsense.
    """
    base = adapter_base_model(source_dir)
    if base != settings.SERVING_BASE_MODEL_NAME:
        raise Conflict(f"The adapter was trained on {base!r}; this platform serves {settings.SERVING_BASE_MODEL_NAME!r}.")
    if parent is not None and parent.org_id != org.pk:
        raise NotFound("No such parent adapter in this organization.")
    fields = {"base_model": base, "parent": parent, "dataset_sha256": dataset_sha256, "reward_spec_version": reward_spec_version,
              "origin": origin}
    # The copy first, outside the transaction: on SQLite a transaction that writes holds every
    # organization's writes, and an uploaded adapter may take a while to copy.
    staging = adapters_root() / str(org.pk) / f".incoming-{uuid.uuid4().hex}"
    shutil.copytree(source_dir, staging)
    try:
        # A registration racing this one took the number: take the next.
        return retried_on_integrity_error(lambda: _register_next_version(org, staging, fields, list(interaction_ids)))
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # moved into place, unless the registration failed


def _register_next_version(org, staging, fields, interaction_ids) -> AdapterVersion:
    version = 1 + (AdapterVersion.objects.for_org(org).order_by("-version").values_list("version", flat=True).first() or 0)
    relative = f"{org.pk}/v{version}"
    with transaction.atomic():
        storage_lock(org=org)  # erasures wait, or are seen: taint_at_registration
        if fields["parent"] is not None:
            fields["parent"].refresh_from_db(fields=["tainted_at", "taint"])
        tainted = taint.taint_at_registration(org=org, parent=fields["parent"], interaction_ids=interaction_ids)
        adapter = AdapterVersion.objects.create(org=org, version=version, name=f"{org.slug}@v{version}", path=relative,
                                                taint=tainted, tainted_at=timezone.now() if tainted else None, **fields)
        lineage = [TrainedOn(org=org, adapter=adapter, interaction_id=i) for i in interaction_ids]
        TrainedOn.objects.for_org(org).bulk_create(lineage, batch_size=taint.CHUNK)
        _move_in(staging, confined_path(relative))
        if tainted:
            taint.taint_announce(adapter)
    return adapter


def _move_in(staging: Path, target: Path) -> None:
    """Rename the staged copy into place: vLLM never sees a half-written adapter.

    Called inside the transaction that creates the version's row, which holds its number: a
    folder already there was left by a registration that crashed before its commit, and no
    row names it, so it is replaced."""
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)


def adapter_get(*, org: Organization, name: str) -> AdapterVersion:
    # a NUL is in no name, and PostgreSQL refuses it in a query (a 500)
    adapter = None if "\x00" in name else AdapterVersion.objects.for_org(org).filter(name=name).first()
    if adapter is None:
        raise NotFound(f"No adapter {name!r} in this organization.")
    return adapter


def adapter_files(adapter: AdapterVersion) -> Path:
    return confined_path(adapter.path)


def route_of(*, org: Organization) -> Route:
    route, _ = Route.objects.for_org(org).get_or_create(org=org)
    return route


def org_adapters_destroy(*, org_id, **_) -> None:
    """Remove a deleted organization's adapter files (connected to tenants' organization_deleted)."""
    shutil.rmtree(confined_path(str(org_id)), ignore_errors=True)
