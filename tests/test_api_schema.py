"""The OpenAPI document of the tenant API: complete, and true to the application.

(a) GET /api/schema/ documents every `api/v1/` route and how to authenticate.
(b) A schemathesis property test drives every documented operation in-process through WSGI
    (`controlplane.wsgi.application`), with acme's owner key, on generated positive and
    negative inputs, and checks that the application never answers 5xx and that its responses
    conform to the schema.
"""

import re

import pytest
import schemathesis
from django.urls import URLPattern, URLResolver, get_resolver
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from controlplane.wsgi import application
from tests.conftest import make_tenant, record

SCHEMA_URL = "/api/schema/"
PREFIX = "api/v1/"


# (a) The document ------------------------------------------------------------------------------

def api_routes() -> set[str]:
    """Every `api/v1/` route of the URL conf, written as an OpenAPI path ("/api/v1/tasks/{task_id}")."""

    def walk(patterns, prefix=""):
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                yield route

    return {
        "/" + re.sub(r"<(?:[^>:]+:)?(\w+)>", r"{\1}", route)
        for route in walk(get_resolver().url_patterns)
        if route.startswith(PREFIX)
    }


@pytest.fixture
def document(client) -> dict:
    response = client.get(SCHEMA_URL, HTTP_ACCEPT="application/json")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_schema_is_an_openapi_3_document(document):
    assert str(document["openapi"]).startswith("3")
    assert document["paths"]


def test_the_schema_documents_every_api_route(document):
    routes = api_routes()
    assert len(routes) > 10, routes
    missing = routes - set(document["paths"])
    assert not missing, f"routes missing from {SCHEMA_URL}: {sorted(missing)}"


def test_the_schema_documents_bearer_authentication(document):
    schemes = document.get("components", {}).get("securitySchemes", {})
    bearer = [name for name, scheme in schemes.items() if scheme.get("type") == "http" and scheme.get("scheme", "").lower() == "bearer"]
    assert bearer, f"no bearer security scheme in components.securitySchemes: {schemes}"
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            required = operation.get("security", document.get("security", []))
            assert any(set(requirement) & set(bearer) for requirement in required), f"{method.upper()} {path} does not require the bearer key"


# (b) The application against its document -----------------------------------------------------

# Loaded once at import, in-process: the schema view needs no database.
schema = schemathesis.openapi.from_wsgi(SCHEMA_URL, application).exclude(
    # Deleting the organization would delete acme (and its key) in the middle of the run; its
    # behaviour is covered by the organization tests, not fuzzed here.
    method="DELETE", path="/api/v1/organization",
)
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=10,
    deterministic=True,  # derandomized: the same cases on every run
    database="none",
)


@pytest.fixture
def acme_objects(transactional_db) -> dict:
    """acme's owner key and one real object for each path parameter of the API.

    `transactional_db`, not `db`: the WSGI handler closes the database connection after each
    request (`close_old_connections`), which would break the transaction the `db` fixture wraps
    the test in. Each operation gets fresh data.
    """
    acme = make_tenant("Acme", training_enabled=True)
    interaction = record(acme.client)
    task = acme.client.post("/api/v1/tasks", {}, format="json").json()["id"]
    record(acme.client, task_id=task)
    key = acme.client.post("/api/v1/api-keys", {"name": "fuzzed key", "role": "viewer"}, format="json").json()["id"]
    member = acme.client.post("/api/v1/members", {"email": "dev@acme.example", "role": "viewer"}, format="json").json()["id"]
    acme.client.post("/api/v1/feedback", {"events": [{"interaction_id": interaction, "type": "edit_accepted", "idempotency_key": "k"}]}, format="json")
    return {
        "key": acme.key,
        "path": {"interaction_id": interaction, "task_id": task, "key_id": key, "member_id": member},
    }


@schema.parametrize()
def test_the_api_never_fails_and_answers_as_documented(case, acme_objects):
    # A well-formed path parameter names one of acme's real objects, so that positive cases get
    # past the lookup and exercise the operation itself; negative ones stay as generated.
    if not case.meta or not case.meta.is_negative_at(ParameterLocation.PATH):
        for name, value in acme_objects["path"].items():
            if name in case.path_parameters:
                case.path_parameters[name] = value
    response = case.call(headers={"Authorization": f"Bearer {acme_objects['key']}"})
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
