"""The OpenAPI document of the tenant API: complete, and true to the application.

(a) GET /api/schema/ documents every `api/v1/` route and how to authenticate.
(b) Schemathesis property tests drive every documented operation in-process through WSGI
    (`controlplane.wsgi.application`), with acme's owner key, on generated positive and
    negative inputs: the application never answers 5xx, and its responses conform to the
    schema (two tests, so that a schema mismatch cannot hide a server error).
"""

import os
import re

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from django.urls import URLPattern, URLResolver, get_resolver
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from controlplane.wsgi import application
from tests.factories import make_tenant, record

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


def test_the_schema_is_built_once_per_format_however_often_anyone_asks(client, monkeypatch):
    """Anyone may ask, without a key: tens of milliseconds of CPU a build."""
    from drf_spectacular.generators import SchemaGenerator

    from controlplane.schema import SchemaView

    monkeypatch.setattr(SchemaView, "_rendered", {})
    builds, build = [], SchemaGenerator.get_schema
    monkeypatch.setattr(SchemaGenerator, "get_schema", lambda self, *args, **kwargs: builds.append(1) or build(self, *args, **kwargs))
    for accept in ("application/json", "application/json", "application/vnd.oai.openapi", "application/json"):
        response = client.get(SCHEMA_URL, {"cache": len(builds)}, HTTP_ACCEPT=accept)
        assert response.status_code == 200 and response["Content-Type"].startswith(accept)
    assert len(builds) == 2


def test_the_schema_documents_every_api_route(document):
    routes = api_routes()
    assert len(routes) > 10, routes
    missing = routes - set(document["paths"])
    assert not missing, f"routes missing from {SCHEMA_URL}: {sorted(missing)}"


def test_the_schema_documents_the_gateway_with_every_parameter_it_accepts(document):
    from serving.gateway.protocol import PARAMETERS

    operation = document["paths"]["/v1/chat/completions"]["post"]
    request = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(document["components"]["schemas"][request]["properties"]) == set(PARAMETERS)
    assert {"200", "400", "401", "404", "429", "503"} <= set(operation["responses"])


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
).exclude(
    # Served by the ASGI gateway in front of Django, with a vLLM behind it: its own tests
    # (tests/serving/test_gateway.py) drive it through the openai client.
    path="/v1/chat/completions",
)
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    # Small, to keep the file under a minute on 2 cores; API_FUZZ_EXAMPLES=200 for a deeper local run.
    max_examples=int(os.environ.get("API_FUZZ_EXAMPLES", 10)),
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

    def post(url: str, body: dict) -> dict:
        response = acme.client.post(url, body, format="json")
        assert response.status_code in (200, 201), response.content
        return response.json()

    interaction = record(acme.client)
    task = post("/api/v1/tasks", {})["id"]
    record(acme.client, task_id=task)
    key = post("/api/v1/api-keys", {"name": "fuzzed key", "role": "viewer"})["id"]
    member = post("/api/v1/members", {"email": "dev@acme.example", "role": "viewer"})["id"]
    post("/api/v1/feedback", {"events": [{"interaction_id": interaction, "type": "edit_accepted", "idempotency_key": "k"}]})
    return {
        "key": acme.key,
        "ids": {"interaction_id": interaction, "task_id": task, "key_id": key, "member_id": member},
    }


def with_real_ids(value, ids: dict):
    """`value` with each id field that ids knows (a body's `interaction_id`) set to acme's object."""
    if isinstance(value, dict):
        return {k: ids[k] if k in ids and isinstance(v, str) else with_real_ids(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [with_real_ids(item, ids) for item in value]
    return value


def call_as_acme(case, objects: dict):
    # Ids in positive inputs (path parameters, and id fields of the body such as a feedback
    # event's `interaction_id`) name acme's real objects, so that valid requests get past the
    # lookup and exercise the operation itself. Negative inputs stay as generated.
    ids = objects["ids"]

    def positive(location) -> bool:
        return case.meta is None or not case.meta.is_negative_at(location)

    if positive(ParameterLocation.PATH):
        for name in case.path_parameters.keys() & ids.keys():
            case.path_parameters[name] = ids[name]
    if positive(ParameterLocation.BODY) and isinstance(case.body, (dict, list)):
        case.body = with_real_ids(case.body, ids)
    return case.call(headers={"Authorization": f"Bearer {objects['key']}"})


# The fixture's objects are shared by the examples of one operation, on purpose.
SHARED_FIXTURE = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@schema.parametrize()
@SHARED_FIXTURE
def test_the_api_never_answers_5xx(case, acme_objects):
    case.validate_response(call_as_acme(case, acme_objects), checks=[not_a_server_error])


@schema.parametrize()
@SHARED_FIXTURE
def test_the_api_answers_as_documented(case, acme_objects):
    case.validate_response(call_as_acme(case, acme_objects), checks=[response_schema_conformance])
