"""Tenant isolation, checked on every endpoint of the tenant API.

The endpoints are not listed here: they are enumerated from Django's URL resolver, so an
endpoint added later is covered automatically, or makes these tests fail until it is described
(an unknown URL kwarg, a write method without a request body).

acme owns every object; globex, the outsider, calls with its owner key (the strongest role, so
no 403 can hide a missing organization check). On each object URL globex must get 404 for every
method the view implements, and acme's data must be exactly as it was. On each list URL globex's
response must not contain anything that identifies acme's data.
"""

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from serving.models import AdapterVersion, Alert
from serving.models import Route as AdapterRoute

from tenants.models import (
    ApiKey,
    AuditEvent,
    BackgroundTask,
    FeedbackEvent,
    Interaction,
    Membership,
    Organization,
    PrivacyPolicy,
)
from tests.factories import record, registered_adapter
from training.models import Cycle, TrainingRun

PREFIX = "api/v1/"
METHODS = ("get", "post", "put", "patch", "delete")
KWARG = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>\w+)>")

# Strings that identify acme's data; none of them may reach globex.
ACME_PROMPT = "acme-confidential-prompt: the merger with initech"
ACME_COMPLETION = "acme-confidential-completion"
ACME_MEMBER = "dev@acme.example"
ACME_KEY_NAME = "acme deploy key"
ACME_FEEDBACK_KEYS = ("acme-idem-accepted", "acme-idem-persisted")
ACME_OUTCOME_KEY = "acme-idem-outcome"
ACME_CANARY_SHARE = 0.123456789  # a number no other text of a response could contain by chance
ACME_ASK_TOLERANCE = 0.0987654321


# The tenant API's routes, from the resolver ---------------------------------------------------

@dataclass(frozen=True)
class Route:
    route: str  # "api/v1/tasks/<uuid:task_id>/outcome"
    view_class: type
    kwargs: tuple[str, ...]

    @property
    def methods(self) -> list[str]:
        """What the view answers; HEAD wherever GET (Django runs get() for it)."""
        methods = [m.upper() for m in METHODS if hasattr(self.view_class, m)]
        return methods + ["HEAD"] * ("GET" in methods)

    def url(self, values: dict[str, str]) -> str:
        return "/" + KWARG.sub(lambda m: str(values[m["name"]]), self.route)


def _walk(patterns, prefix: str = ""):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern


def tenant_api_routes() -> list[Route]:
    routes = []
    for route, pattern in _walk(get_resolver().url_patterns):
        if not route.startswith(PREFIX):
            continue
        view_class = getattr(pattern.callback, "view_class", None) or getattr(pattern.callback, "cls", None)
        assert view_class is not None, f"{route}: not a class-based view; this test cannot tell which methods it answers."
        routes.append(Route(route, view_class, tuple(m["name"] for m in KWARG.finditer(route))))
    return routes


ROUTES = tenant_api_routes()
OBJECT_ROUTES = [r for r in ROUTES if r.kwargs]
COLLECTION_ROUTES = [r for r in ROUTES if not r.kwargs and "GET" in r.methods]


# acme's objects -------------------------------------------------------------------------------

@dataclass
class AcmeData:
    ids: dict[str, str]  # URL kwarg name -> the id of one of acme's objects
    secrets: set[str] = field(default_factory=set)  # ids and strings that identify acme's data


def _interaction(acme) -> str:
    return record(acme.client, text=ACME_PROMPT, completion=ACME_COMPLETION)


def _task(acme) -> str:
    response = acme.client.post("/api/v1/tasks", {}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _key(acme) -> str:
    response = acme.client.post("/api/v1/api-keys", {"name": ACME_KEY_NAME, "role": "viewer"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _member(acme) -> str:
    response = acme.client.post("/api/v1/members", {"email": ACME_MEMBER, "role": "viewer"}, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def _adapter_name(acme) -> str:
    return registered_adapter(acme.org, Path(tempfile.mkdtemp(prefix="isolation-"))).name


def _training_run(acme) -> str:
    return str(TrainingRun.objects.create(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, requested_by="owner").pk)


def _cycle(acme) -> str:
    return str(Cycle.objects.create(org=acme.org, trigger=TrainingRun.Trigger.REQUEST, requested_by="owner").pk)


def _alert(acme) -> str:
    adapter = AdapterVersion.objects.for_org(acme.org).order_by("version").first() or registered_adapter(
        acme.org, Path(tempfile.mkdtemp(prefix="isolation-")))
    return str(Alert.objects.create(org=acme.org, kind=Alert.Kind.REWARD_HACKING, adapter=adapter,
                                    message=f"{adapter.name} was blocked", figures=[]).pk)


# Each URL kwarg of the tenant API, and how to make one of acme's objects for it.
OBJECT_FACTORIES = {
    "interaction_id": _interaction,
    "task_id": _task,
    "key_id": _key,
    "member_id": _member,
    "name": _adapter_name,
    "run_id": _training_run,
    "cycle_id": _cycle,
    "alert_id": _alert,
}

# A body that would be valid if the object were globex's own, so that a 400 cannot stand in for
# the 404 and hide a missing organization check. DELETE and GET send none.
WRITE_BODIES = {
    ("api/v1/members/<uuid:member_id>", "PATCH"): {"role": "admin"},
    ("api/v1/tasks/<uuid:task_id>/outcome", "POST"): {"value": 1.0, "idempotency_key": "globex-outcome"},
    ("api/v1/adapters/<str:name>/promote", "POST"): {},
    ("api/v1/adapters/<str:name>/rollback", "POST"): {},
    ("api/v1/members/<uuid:member_id>/invitation", "POST"): {},
    ("api/v1/alerts/<uuid:alert_id>/acknowledge", "POST"): {},
}


@pytest.fixture
def acme_data(acme, globex, settings, tmp_path) -> AcmeData:
    """One of acme's objects of each kind, with feedback and an outcome, and some of globex's own
    data so that globex's lists are not trivially empty."""
    settings.SERVING_ADAPTERS_ROOT, settings.SERVING_BASE_MODEL_NAME = str(tmp_path / "adapters"), "isolation-base"
    ids = {name: make(acme) for name, make in OBJECT_FACTORIES.items()}
    events = [{"interaction_id": ids["interaction_id"], "type": t, "idempotency_key": k}
              for t, k in zip(("edit_accepted", "edit_persisted"), ACME_FEEDBACK_KEYS, strict=True)]
    assert acme.client.post("/api/v1/feedback", {"events": events}, format="json").status_code == 200
    outcome = acme.client.post(f"/api/v1/tasks/{ids['task_id']}/outcome",
                               {"value": 0.5, "idempotency_key": ACME_OUTCOME_KEY}, format="json")
    assert outcome.status_code == 201, outcome.content
    second_task = _task(acme)  # one without an outcome, the target of the outcome check
    ids["task_id"] = second_task
    assert acme.client.put("/api/v1/canary-policy", {"share": ACME_CANARY_SHARE}, format="json").status_code == 200
    assert acme.client.put("/api/v1/gate-thresholds", {"ask_rate_on_clear": ACME_ASK_TOLERANCE}, format="json").status_code == 200

    acme_adapter = AdapterVersion.objects.for_org(acme.org).get(name=ids["name"])
    Alert.objects.create(org=acme.org, kind=Alert.Kind.REWARD_HACKING, adapter=acme_adapter,
                         message=f"{acme_adapter.name} was blocked", figures=[])
    registered_adapter(globex.org, tmp_path)

    theirs = record(globex.client)
    globex.client.post("/api/v1/feedback", {"events": [{"interaction_id": theirs, "type": "edit_accepted", "idempotency_key": "globex-own"}]}, format="json")
    _task(globex)

    org = acme.org
    secrets = {
        org.slug, org.name, str(org.pk), ACME_PROMPT, ACME_COMPLETION, ACME_MEMBER, ACME_KEY_NAME,
        *ACME_FEEDBACK_KEYS, ACME_OUTCOME_KEY, str(ACME_CANARY_SHARE), str(ACME_ASK_TOLERANCE), acme_adapter.name, str(acme_adapter.pk),
        *(str(pk) for pk in Interaction.objects.for_org(org).values_list("pk", flat=True)),
        *(str(pk) for pk in BackgroundTask.objects.for_org(org).values_list("pk", flat=True)),
        *(str(pk) for pk in FeedbackEvent.objects.for_org(org).values_list("pk", flat=True)),
        *(str(pk) for pk in ApiKey.objects.for_org(org).values_list("pk", flat=True)),
        *ApiKey.objects.for_org(org).values_list("prefix", flat=True),
        *Membership.objects.for_org(org).values_list("user__email", flat=True),
        *(str(pk) for pk in TrainingRun.objects.for_org(org).values_list("pk", flat=True)),
        *(str(pk) for pk in Cycle.objects.for_org(org).values_list("pk", flat=True)),
        *(str(pk) for pk in Alert.objects.for_org(org).values_list("pk", flat=True)),
        # Integer member ids are too short to search for in text; members are found by email.
    }
    return AcmeData(ids=ids, secrets=secrets)


def acme_state(org) -> dict:
    """Everything of acme's that an outsider's request could change."""
    return {
        "org": list(Organization.objects.filter(pk=org.pk).values_list("slug", "name")),
        "policy": list(PrivacyPolicy.objects.for_org(org).values("training_enabled", "store_content", "retention_days", "redact")),
        "interactions": sorted(Interaction.objects.for_org(org).values_list("pk", "task_id", "content", "content_purged_at")),
        "tasks": sorted(BackgroundTask.objects.for_org(org).values_list("pk", flat=True)),
        "feedback": sorted(FeedbackEvent.objects.for_org(org).values_list("pk", "interaction_id", "task_id", "type", "value", "idempotency_key")),
        "keys": sorted(ApiKey.objects.for_org(org).values_list("pk", "role", "revoked_at")),
        "members": sorted(Membership.objects.for_org(org).values_list("pk", "user__email", "role")),
        "audit_events": AuditEvent.objects.for_org(org).count(),
        "adapters": sorted(AdapterVersion.objects.for_org(org).values_list("pk", "name", "status")),
        "route": list(AdapterRoute.objects.for_org(org).values_list("serving_id", "canary_id")),
        "training_runs": sorted(TrainingRun.objects.for_org(org).values_list("pk", "status")),
        "cycles": sorted(Cycle.objects.for_org(org).values_list("pk", "status")),
    }


def body_text(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def call(client, method: str, url: str, body=None):
    return getattr(client, method.lower())(url, body, format="json") if body is not None else getattr(client, method.lower())(url)


# The tests ------------------------------------------------------------------------------------

def test_the_enumeration_finds_the_tenant_api():
    routes = {r.route for r in ROUTES}
    assert {"api/v1/interactions/<uuid:interaction_id>", "api/v1/feedback", "api/v1/export"} <= routes, routes
    assert OBJECT_ROUTES and COLLECTION_ROUTES


@pytest.mark.parametrize("route", OBJECT_ROUTES, ids=lambda r: r.route)
def test_an_outsider_gets_404_for_every_object_url(acme, globex, acme_data, route):
    unknown = set(route.kwargs) - set(OBJECT_FACTORIES)
    assert not unknown, (
        f"{route.route} takes {sorted(unknown)}, which OBJECT_FACTORIES in {__file__} cannot make: "
        f"add a factory that creates one of acme's objects for it, so that this endpoint is checked for isolation."
    )
    url = route.url(acme_data.ids)
    before = acme_state(acme.org)
    for method in route.methods:
        body = None
        if method in ("POST", "PUT", "PATCH"):
            assert (route.route, method) in WRITE_BODIES, (
                f"{method} {route.route} has no request body in WRITE_BODIES in {__file__}: add one that would be "
                f"valid for globex's own object, so that a 400 cannot hide a missing organization check."
            )
            body = WRITE_BODIES[route.route, method]
        response = call(globex.client, method, url, body)
        assert response.status_code == 404, f"globex's {method} {url} answered {response.status_code}: {body_text(response)[:500]}"
        assert acme_state(acme.org) == before, f"globex's {method} {url} changed acme's data"


@pytest.mark.parametrize("route", COLLECTION_ROUTES, ids=lambda r: r.route)
def test_an_outsiders_lists_show_nothing_of_another_organization(acme, globex, acme_data, route):
    response = globex.client.get(route.url({}))
    assert response.status_code == 200, body_text(response)[:500]
    text = body_text(response)
    assert text.strip(), f"GET {route.route} answered an empty body"
    leaked = sorted(s for s in acme_data.secrets if s.lower() in text.lower())
    assert not leaked, f"globex's GET /{route.route} shows acme's {leaked}"


def test_feedback_naming_another_orgs_interaction_is_404_and_stores_nothing(acme, globex, acme_data):
    before, globex_feedback = acme_state(acme.org), FeedbackEvent.objects.for_org(globex.org).count()
    event = {"interaction_id": acme_data.ids["interaction_id"], "type": "edit_rejected", "idempotency_key": "globex-steal"}
    response = globex.client.post("/api/v1/feedback", {"events": [event]}, format="json")
    assert response.status_code == 404, response.content
    assert FeedbackEvent.objects.for_org(globex.org).count() == globex_feedback
    assert acme_state(acme.org) == before


def test_an_interaction_cannot_join_another_orgs_task(acme, globex, acme_data):
    before, globex_interactions = acme_state(acme.org), Interaction.objects.for_org(globex.org).count()
    body = {"messages": [{"role": "user", "content": "hi"}], "completion": "hello", "task_id": acme_data.ids["task_id"]}
    response = globex.client.post("/api/v1/interactions", body, format="json")
    assert response.status_code == 404, response.content
    assert Interaction.objects.for_org(globex.org).count() == globex_interactions
    assert acme_state(acme.org) == before
