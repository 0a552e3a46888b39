"""Shared fixtures of the whole suite; what they build comes from tests/factories.py.

Two organizations: acme (the owner of the objects under test, with training on) and globex
(the outsider whose identifiers must never reach acme's data, and the other way round), with
acme's viewer and admin clients; the tiny base model that serving and training tests run on,
and the adapters root of tests that register adapters.
"""

from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tenants.models import Role
from tests.factories import Tenant, make_tenant

# Organizations ------------------------------------------------------------------------------


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


# Models and adapters ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tiny_base_model(tmp_path_factory) -> Path:
    """The demo's model architecture at its smallest, built once per session (about 10 s)."""
    from demo.base_model import bootstrap
    from demo.base_model.config import TINY

    return bootstrap.ensure_base_model(TINY, tmp_path_factory.mktemp("base-model"), progress=False)


@pytest.fixture
def adapters_root(settings, tmp_path) -> Path:
    """Adapters registered by the test go under its own folder, for the base "demo-base"."""
    settings.SERVING_ADAPTERS_ROOT = str(tmp_path / "adapters")
    settings.SERVING_BASE_MODEL_NAME = "demo-base"
    return tmp_path / "adapters"
