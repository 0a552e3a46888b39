"""Deploying an adapter version to every vLLM replica, switching routing to it, rolling back.

Order matters: a version is loaded into every replica first and routing switches only once
all of them have it, so no request is ever sent to a replica that lacks its adapter. A
replica that fails leaves routing as it was. The version replaced stays loaded: requests
still running on it finish, and a rollback to it is a routing switch, not a load. Versions
two deployments back are unloaded (they have long been drained by then).
"""

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from serving import taint, vllm_client
from serving.models import AdapterVersion, Route
from serving.registry import adapter_files, route_of
from serving.routing import route_changed
from tenants.audit import audit_record
from tenants.errors import Conflict, InvalidInput, Unavailable
from tenants.models import Organization

log = logging.getLogger(__name__)


class ReplicaFailed(Unavailable):
    code = "replica_failed"


def replica_urls() -> list[str]:
    return list(settings.SERVING_VLLM_URLS)


def adapter_load_everywhere(adapter: AdapterVersion) -> None:
    """Make `adapter` servable on every live replica, or on none: if a replica that answers
    fails to load it, it is unloaded again from those that just took it. A replica that does
    not answer is skipped; the gateways give it every routed adapter before it serves again
    (gateway/replicas.py)."""
    path = adapter_files(adapter)
    loaded, down, failures = [], [], []

    def load(url: str) -> None:
        try:
            loaded_from = vllm_client.served_roots(url).get(adapter.name)
        except vllm_client.VllmError as error:
            (down if error.status is None else failures).append(f"{url}: {error}")
            return
        try:
            if loaded_from is not None and loaded_from != str(path):
                # The name serves other files: a deleted organization's, whose slug was taken
                # again while this replica was unreachable. Never serve them under this name.
                vllm_client.unload_adapter(url, name=adapter.name)
                loaded_from = None
            if loaded_from is None:
                vllm_client.load_adapter(url, name=adapter.name, path=path)
                loaded.append(url)
        except vllm_client.VllmError as error:
            failures.append(f"{url}: {error}")

    urls = replica_urls()
    if not urls:
        raise ReplicaFailed("No vLLM replicas are configured (PLATFORM_VLLM_URLS).")
    with ThreadPoolExecutor(max_workers=len(urls)) as pool:
        list(pool.map(load, urls))
    if failures:
        _unload_from(loaded, adapter.name)
        raise ReplicaFailed(f"{adapter.name} could not be loaded on every live replica; routing is unchanged.", details=failures + down)
    if len(down) == len(urls):
        raise ReplicaFailed(f"No vLLM replica answers; {adapter.name} was not loaded and routing is unchanged.", details=down)
    for replica in down:
        log.warning("%s was not loaded on a replica that does not answer; it gets it before it serves again. %s", adapter.name, replica)


def _unload_from(urls: list[str], name: str) -> None:
    for url in urls:
        try:
            vllm_client.unload_adapter(url, name=name)
        except vllm_client.VllmError as error:
            log.warning("could not unload %s from %s again: %s", name, url, error)


def adapter_deploy(*, adapter: AdapterVersion, actor: str) -> Route:
    """Serve `adapter` as its organization's incumbent: loaded on every replica first, then
    routed in one switch."""
    if adapter.status == AdapterVersion.Status.BLOCKED:
        raise Conflict(f"{adapter.name} was blocked by a gate; it is never served.")
    if not taint.deployable(adapter):
        raise Conflict(f"{adapter.name} was trained on erased content, and the privacy policy retrains: it is not served again.")
    adapter_load_everywhere(adapter)
    return deploy_switch(adapter=adapter, actor=actor)


def deploy_switch(*, adapter: AdapterVersion, actor: str) -> Route:
    """adapter_deploy's routing switch, for a caller that loaded `adapter` everywhere already;
    it joins the caller's transaction, like canary_switch."""
    with transaction.atomic():
        route = _locked_route(adapter.org)
        _require_status(adapter, *(s for s in AdapterVersion.Status if s != AdapterVersion.Status.BLOCKED),
                        why="a blocked version is never served")
        previous = route.serving
        if previous == adapter:
            return route
        adapter.replaced, adapter.deployed_at = previous, timezone.now()
        adapter.save(update_fields=["replaced", "deployed_at"])
        _switch(route, to=adapter)
        audit_record(org=adapter.org, actor=actor, action="adapter.deploy", target=adapter.name,
                     before={"serving": _name(previous)}, after={"serving": adapter.name})
        taint.tainted_retire(org=adapter.org)  # a clean version serves: what erasure reached goes
        transaction.on_commit(lambda: adapters_unload_drained(org=adapter.org))
    return route


def adapter_rollback(*, org: Organization, actor: str) -> Route:
    """Serve again what the current version replaced (the base model if it replaced nothing).
    Successive rollbacks walk back through the deployments, past versions erasure took away."""
    route = Route.objects.for_org(org).select_related("serving__replaced").first()
    if route is None or route.serving is None:
        raise Conflict("The organization is served the base model; there is nothing to roll back.")
    current, target = route.serving, rollback_target(route.serving)
    if target is not None:
        adapter_load_everywhere(target)  # normally still loaded: then this only checks
    with transaction.atomic():
        route = _locked_route(org)
        if route.serving_id != current.pk:
            raise Conflict("The route changed while rolling back; look again before retrying.")
        _switch(route, to=target)
        audit_record(org=org, actor=actor, action="adapter.rollback", target=current.name,
                     before={"serving": current.name}, after={"serving": _name(target)})
    return route


def rollback_target(version: AdapterVersion) -> AdapterVersion | None:
    """What a rollback from `version` returns to: what it replaced, or, past what erasure took
    away (serving/taint.py), the one before; None: the base model."""
    target, seen = version.replaced, {version.pk}
    while target is not None and not taint.deployable(target):
        if target.pk in seen:  # redeploying an old version makes the history loop
            return None
        seen.add(target.pk)
        target = target.replaced
    return target


def canary_start(*, adapter: AdapterVersion, share: float, actor: str) -> Route:
    """Serve `adapter` to `share` of the organization's end users (sticky per user), beside
    its incumbent: loaded on every replica first, then routed in one switch."""
    adapter_load_everywhere(adapter)
    return canary_switch(adapter=adapter, share=share, actor=actor)


def canary_switch(*, adapter: AdapterVersion, share: float, actor: str) -> Route:
    """canary_start's routing switch, for a caller that loaded `adapter` everywhere already
    (outside any transaction: it waits on the replicas). It joins the caller's transaction, so
    that a cycle starts its canary only under the transition that owns it."""
    if not 0 < share < 1:
        raise InvalidInput("A canary's share is between 0 and 1.")
    with transaction.atomic():
        route = _locked_route(adapter.org)
        if route.canary_id is not None:
            raise Conflict(f"{route.canary.name} is already in canary for this organization.")
        _require_status(adapter, AdapterVersion.Status.CANDIDATE, why="only a candidate goes to canary")
        route.canary, route.canary_share = adapter, share
        route.save()
        adapter.status = AdapterVersion.Status.CANARY
        adapter.save(update_fields=["status"])
        audit_record(org=adapter.org, actor=actor, action="adapter.canary", target=adapter.name, after={"share": share})
        transaction.on_commit(lambda: route_changed(org_id=adapter.org_id))
    return route


def _require_status(adapter: AdapterVersion, *allowed: str, why: str) -> None:
    """Check the version's status as stored, under the route's lock: the copy in hand may be
    stale (a duplicate task blocked it a moment ago)."""
    adapter.refresh_from_db(fields=["status"])
    if adapter.status not in allowed:
        raise Conflict(f"{adapter.name} is {adapter.status}; {why}.")


def canary_stop(*, adapter: AdapterVersion, actor: str, reason: str) -> Route:
    """Take `adapter` out of canary: its users go back to the incumbent, and it is blocked from
    serving again (a rolled-back candidate is not retried; the next cycle trains a new one)."""
    with transaction.atomic():
        route = _locked_route(adapter.org)
        if route.canary_id != adapter.pk:
            raise Conflict(f"{adapter.name} is not in canary.")
        route.canary, route.canary_share = None, 0.0
        route.save()
        adapter.status = AdapterVersion.Status.BLOCKED
        adapter.save(update_fields=["status"])
        audit_record(org=adapter.org, actor=actor, action="adapter.canary_rollback", target=adapter.name, after={"reason": reason})
        transaction.on_commit(lambda: route_changed(org_id=adapter.org_id))
    transaction.on_commit(lambda: adapters_unload_drained(org=adapter.org))
    return route


def adapter_withdraw(*, adapter: AdapterVersion, actor: str) -> Route:
    """Stop serving `adapter` by hand: in canary, its users go back to the incumbent (canary_stop);
    serving, the organization goes back to what it replaced (adapter_rollback)."""
    route = route_of(org=adapter.org)
    if route.canary_id == adapter.pk:
        return canary_stop(adapter=adapter, actor=actor, reason="by hand")
    if route.serving_id != adapter.pk:
        raise Conflict(f"{adapter.name} is neither serving this organization nor in canary.")
    return adapter_rollback(org=adapter.org, actor=actor)


def adapters_unload_drained(*, org: Organization) -> None:
    """Unload the organization's versions that routing no longer reaches, except the one a
    rollback would return to. Best effort: a replica that is down forgets them anyway."""
    route = Route.objects.for_org(org).select_related("serving").first()
    rollback_to = rollback_target(route.serving) if route.serving else None
    keep = {route.serving_id, route.canary_id, rollback_to.pk if rollback_to else None}
    names = set(AdapterVersion.objects.for_org(org).exclude(pk__in={k for k in keep if k}).values_list("name", flat=True))
    _unload_everywhere(names.__contains__, whose=f"{org.slug}'s drained adapters")


def adapters_sync() -> int:
    """Load every routed version into every replica. Returns how many."""
    adapters = _routed()
    for adapter in adapters:
        adapter_load_everywhere(adapter)
    return len(adapters)


def routed_adapters() -> dict[str, Path]:
    """What a replica must hold before it takes traffic, by served name: the files of every
    organization's serving and canary versions and of the versions a rollback returns to."""
    return {adapter.name: adapter_files(adapter) for adapter in _routed()}


def _routed() -> list[AdapterVersion]:
    routed = AdapterVersion.objects.across_orgs().filter(
        status__in=(AdapterVersion.Status.SERVING, AdapterVersion.Status.CANARY)
    ).select_related("replaced", "org")
    rollbacks = [a.replaced for a in routed if a.replaced and a.replaced.weights_deleted_at is None]
    return list(({a.pk: a for a in routed} | {a.pk: a for a in rollbacks}).values())


def _locked_route(org: Organization) -> Route:
    Route.objects.for_org(org).get_or_create(org=org)
    return Route.objects.for_org(org).select_for_update(of=("self",)).select_related("serving", "canary").get()


def _switch(route: Route, *, to: AdapterVersion | None) -> None:
    """Point the route at `to` (None: the base model); the version it leaves is retired."""
    if route.serving is not None:
        route.serving.status = AdapterVersion.Status.RETIRED
        route.serving.save(update_fields=["status"])
    if to is not None:
        to.status = AdapterVersion.Status.SERVING
        to.save(update_fields=["status"])
        if route.canary_id == to.pk:
            route.canary, route.canary_share = None, 0.0
    route.serving = to
    route.save()
    transaction.on_commit(lambda: route_changed(org_id=route.org_id))


def _name(adapter: AdapterVersion | None) -> str:
    return adapter.name if adapter is not None else settings.SERVING_BASE_MODEL_NAME


def org_adapters_unload(*, slug: str, **_) -> None:
    """Take a deleted organization's adapters off every replica: its slug, and so its adapter
    names, may be taken again (connected to tenants' organization_deleted)."""
    _unload_everywhere(lambda name: name.startswith(f"{slug}@"), whose=f"the deleted organization {slug}'s adapters")


def _unload_everywhere(unwanted: Callable[[str], bool], *, whose: str) -> None:
    """Unload from every replica the served names `unwanted` picks. Best effort: a replica
    that is down is logged and skipped (a deployment checks what each replica serves)."""
    for url in replica_urls():
        try:
            for name in filter(unwanted, vllm_client.served_models(url)):
                vllm_client.unload_adapter(url, name=name)
        except vllm_client.VllmError as error:
            log.warning("unloading %s from %s failed: %s", whose, url, error)
