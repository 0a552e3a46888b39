"""Which model serves a request: the organization's route for `model="default"`, or one of
its own deployed adapter versions named explicitly. Nothing else is reachable: another
organization's adapter, a retired or blocked version, a path, are all "no such model".
"""

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from serving.models import AdapterVersion, Route
from serving.registry import confined_path
from serving.ttl_cache import TtlCache
from tenants.errors import NotFound
from tenants.locking import OrgRows
from tenants.models import Organization

DEFAULT_MODEL = "default"


@dataclass(frozen=True)
class Target:
    name: str  # what vLLM serves it as and the response's `model` says: "<org>@v<N>" or the base model's name
    adapter_path: Path | None  # None: the base model

    @property
    def is_base(self) -> bool:
        return self.adapter_path is None


# Routing changes reach this process at once (deployments forget the entry) and other
# gateway processes within this many seconds.
ROUTE_CACHE_S = 0.5


@dataclass(frozen=True)
class RouteSnapshot:
    serving: Target
    canary: Target | None
    canary_share: float


_routes: TtlCache[RouteSnapshot] = TtlCache(ROUTE_CACHE_S)


def target_resolve(*, org: Organization, model: str, end_user: str | None) -> Target:
    if model == DEFAULT_MODEL:
        return _chosen(_routes.get(org.pk, lambda: _route_snapshot(org)), end_user)
    adapter = AdapterVersion.objects.for_org(org).filter(
        name=model, status__in=(AdapterVersion.Status.SERVING, AdapterVersion.Status.CANARY)
    ).first()
    if adapter is None:
        raise NotFound(f"The model {model!r} does not exist or is not deployed in this organization. Use \"default\".")
    return _target(adapter)


def target_known(*, org: Organization, model: str, end_user: str | None) -> Target | None:
    """`target_resolve` from what this process read within the last ROUTE_CACHE_S, without the
    database; None when that is not enough (an explicit version, a route not read lately)."""
    route = _routes.peek(org.pk) if model == DEFAULT_MODEL else None
    return None if route is None else _chosen(route, end_user)


def _chosen(route: RouteSnapshot, end_user: str | None) -> Target:
    if route.canary is not None and in_canary(canary=route.canary.name, end_user=end_user, share=route.canary_share):
        return route.canary
    return route.serving


def route_changed(*, org_id) -> None:
    """Called by deployments once a routing change has committed."""
    _routes.forget(org_id)


def base_target() -> Target:
    return Target(name=settings.SERVING_BASE_MODEL_NAME, adapter_path=None)


# Read by every gateway process twice a second for each organization with traffic: SQL built
# once (tenants/locking.py), since building it through the ORM cost 30 times running it.
_route_rows = OrgRows(lambda org_id: Route.objects.for_org(org_id).values_list(
    "serving__name", "serving__path", "canary__name", "canary__path", "canary_share"))


def _route_snapshot(org: Organization) -> RouteSnapshot:
    rows = _route_rows.read(org.pk)
    if not rows:
        return RouteSnapshot(serving=base_target(), canary=None, canary_share=0.0)
    serving_name, serving_path, canary_name, canary_path, canary_share = rows[0]
    return RouteSnapshot(
        serving=_target_at(serving_name, serving_path) if serving_name is not None else base_target(),
        canary=_target_at(canary_name, canary_path) if canary_name is not None else None,
        canary_share=canary_share,
    )


def in_canary(*, canary: str, end_user: str | None, share: float) -> bool:
    """Sticky per end user: the same user always lands on the same side of a given canary's
    share. Each canary (a version name, unique across organizations) draws its own users, so
    that the same few are not the first to meet every new version and one unlucky split is not
    repeated canary after canary. A request without a user is assigned at random."""
    if end_user is None:
        return random.random() < share
    digest = hashlib.sha256(f"{canary}:{end_user}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _target(adapter: AdapterVersion) -> Target:
    return _target_at(adapter.name, adapter.path)


def _target_at(name: str, path: str) -> Target:
    """An adapter version's target from its name and its path under the adapters' folder."""
    return Target(name=name, adapter_path=confined_path(path))
