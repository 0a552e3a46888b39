"""Shared fixtures: two organizations, acme (the owner of the objects under test) and globex
(the outsider whose identifiers must never reach acme's data, and the other way round), and the
tiny base model that serving and training tests run on."""

from dataclasses import dataclass
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tenants.models import Organization, Role
from tenants.organizations import api_key_create, org_create


@dataclass
class Tenant:
    org: Organization
    key: str  # the owner's key
    client: APIClient  # authenticated with the owner's key

    def client_with_role(self, role: str) -> APIClient:
        _, key = api_key_create(org=self.org, name=f"{role} key", role=role, actor="test")
        return api_client(key)


def api_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def make_tenant(name: str, **policy) -> Tenant:
    org, key = org_create(name=name, owner_email=f"owner@{name.lower()}.example", policy=policy or None)
    return Tenant(org=org, key=key, client=api_client(key))


@pytest.fixture(scope="session")
def tiny_base_model(tmp_path_factory) -> Path:
    """The demo's model architecture at its smallest, built once per session (about 10 s)."""
    from demo.base_model import bootstrap
    from demo.base_model.config import TINY

    return bootstrap.ensure_base_model(TINY, tmp_path_factory.mktemp("base-model"), progress=False)


@pytest.fixture
def acme(db) -> Tenant:
    return make_tenant("Acme", training_enabled=True)


@pytest.fixture
def globex(db) -> Tenant:
    return make_tenant("Globex")


@pytest.fixture
def viewer(acme) -> APIClient:
    return acme.client_with_role(Role.VIEWER)


@pytest.fixture
def admin(acme) -> APIClient:
    return acme.client_with_role(Role.ADMIN)


def record(client: APIClient, text: str = "Task: Return the sum of the numbers in a list.", completion: str = "<ask>Which file?</ask>", **extra) -> str:
    """Record an interaction through the public API and return its id."""
    body = {"messages": [{"role": "user", "content": text}], "completion": completion, **extra}
    response = client.post("/api/v1/interactions", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]
