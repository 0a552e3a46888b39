"""Erasure reaches the adapters.

Every trained version names the interactions it was trained on (`TrainedOn`). When content
goes — erased, purged by retention, or dropped by zero retention (tenants.signals.content_erased)
— every version trained on any of it, and every version descended from one, is tainted in the
same transaction, with why in counts. The organization's privacy policy (`tainted_adapters`)
says what follows:

    retrain  a tainted version is not deployed again; the next cycle (started at once, by
             training) trains from the newest untainted ancestor on what is left, and once a
             clean version serves, the tainted ones are retired and their weights deleted
    keep     tainted versions may serve on; each taint is recorded in the audit log as kept

Under either, a tainted version is never the parent of a new one.
"""

import shutil
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from serving import registry
from serving.models import AdapterVersion, Route, TrainedOn
from serving.signals import adapters_tainted
from tenants.audit import audit_record
from tenants.models import Interaction, Organization, PrivacyPolicy

RETRAIN, KEEP = "retrain", "keep"
CHUNK = 500  # ids per query: well under any database's parameter limit


def taint_policy(org: Organization) -> str:
    return PrivacyPolicy.objects.for_org(org).values_list("tainted_adapters", flat=True).get()


def adapters_taint(*, org: Organization, interaction_ids: list[str], reason: str, **_) -> list[AdapterVersion]:
    """Taint the versions trained on these interactions, and their descendants (connected to
    tenants' content_erased, inside the transaction that drops the content)."""
    hits = Counter()
    for start in range(0, len(interaction_ids), CHUNK):
        chunk = interaction_ids[start:start + CHUNK]
        hits.update(TrainedOn.objects.for_org(org).filter(interaction_id__in=chunk).values_list("adapter_id", flat=True))
    if not hits:
        return []
    versions = {version.pk: version for version in AdapterVersion.objects.for_org(org).select_related("org")}
    changed = {}
    for adapter_id, count in hits.items():
        version = versions[adapter_id]
        version.taint = {**(version.taint or {}), reason: (version.taint or {}).get(reason, 0) + count}
        changed[adapter_id] = version
    children = defaultdict(list)
    for version in versions.values():
        children[version.parent_id].append(version)
    for adapter_id in hits:
        for descendant in _descendants(adapter_id, children):
            if descendant.tainted_at is None and descendant.pk not in changed:
                descendant.taint = {"via": versions[adapter_id].name}
                changed[descendant.pk] = descendant
    return _mark(org, changed.values(), actor=reason)


def _descendants(adapter_id, children: dict) -> Iterable[AdapterVersion]:
    stack = list(children[adapter_id])
    while stack:
        version = stack.pop()
        yield version
        stack.extend(children[version.pk])


def _mark(org: Organization, versions: Iterable[AdapterVersion], *, actor: str) -> list[AdapterVersion]:
    """Save each version's taint; the newly tainted are audited and announced (training retrains)."""
    now, newly = timezone.now(), []
    for version in versions:
        if version.tainted_at is None:
            version.tainted_at = now
            newly.append(version)
        AdapterVersion.objects.for_org(org).filter(pk=version.pk).update(taint=version.taint, tainted_at=version.tainted_at)
    if newly:
        _announce(org, newly, actor=actor)
    return newly


def _announce(org: Organization, versions: list[AdapterVersion], *, actor: str) -> None:
    policy = taint_policy(org)
    for version in versions:
        audit_record(org=org, actor=actor, action="adapter.tainted", target=version.name, after={**version.taint, "policy": policy})
    adapters_tainted.send(sender=AdapterVersion, org=org, adapters=versions)


def taint_at_registration(*, org: Organization, parent: AdapterVersion | None, interaction_ids: list[str]) -> dict | None:
    """Why a version about to be registered is tainted already, or None: its parent is, or some
    of its data was erased or purged while it trained. Called under the organization's storage
    lock (tenants.storage.storage_lock), which erasures and purges take too: either they see
    the new version's lineage, or it sees what they dropped."""
    taint = {}
    if parent is not None and parent.tainted_at is not None:
        taint["via"] = parent.name
    kept = set()
    for start in range(0, len(interaction_ids), CHUNK):
        chunk = interaction_ids[start:start + CHUNK]
        rows = list(Interaction.objects.for_org(org).filter(pk__in=chunk).values_list("pk", "content_purged_at"))
        kept.update(str(pk) for pk, purged_at in rows if purged_at is None)
        purged = sum(purged_at is not None for _, purged_at in rows)
        if purged:
            taint["purged"] = taint.get("purged", 0) + purged
    erased = len(set(interaction_ids)) - len(kept) - taint.get("purged", 0)
    if erased:
        taint["erased"] = erased
    return taint or None


def taint_announce(adapter: AdapterVersion) -> None:
    """Audit and announce a version registered tainted, like one tainted later."""
    _announce(adapter.org, [adapter], actor="training")


def untainted_ancestor(version: AdapterVersion | None) -> AdapterVersion | None:
    """The newest version of `version`'s lineage (itself included) that erasure did not reach;
    None: the base model."""
    while version is not None and version.tainted_at is not None:
        version = version.parent
    return version


def deployable(version: AdapterVersion) -> bool:
    """Whether erasure still lets `version` serve: its weights exist, and it is clean or its
    organization keeps tainted versions."""
    if version.weights_deleted_at is not None:
        return False
    return version.tainted_at is None or taint_policy(version.org) == KEEP


def tainted_retire(*, org: Organization) -> list[str]:
    """Once a clean version serves an organization that retrains: retire its tainted versions
    that routing no longer reaches and delete their weights (after the commit). Inside the
    deployment's transaction. Returns their names."""
    if taint_policy(org) != RETRAIN:
        return []
    route = Route.objects.for_org(org).get()
    if route.serving is None or route.serving.tainted_at is not None:
        return []
    retiring = list(AdapterVersion.objects.for_org(org).filter(tainted_at__isnull=False, weights_deleted_at__isnull=True)
                    .exclude(pk__in=[pk for pk in (route.serving_id, route.canary_id) if pk]))
    if not retiring:
        return []
    now = timezone.now()
    for version in retiring:
        changes = {"weights_deleted_at": now}
        if version.status != AdapterVersion.Status.BLOCKED:
            changes["status"] = AdapterVersion.Status.RETIRED
        AdapterVersion.objects.for_org(org).filter(pk=version.pk).update(**changes)
        audit_record(org=org, actor="erasure", action="adapter.weights_deleted", target=version.name,
                     after={"clean_successor": route.serving.name})
    paths = [registry.adapter_files(version) for version in retiring]
    transaction.on_commit(lambda: _delete(paths))
    return [version.name for version in retiring]


def _delete(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
