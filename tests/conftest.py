"""Shared fixtures of the whole suite; what they build comes from tests/factories.py.

Two organizations: acme (the owner of the objects under test, with training on) and globex
(the outsider whose identifiers must never reach acme's data, and the other way round), with
acme's viewer and admin clients; the tiny base model that serving and training tests run on,
and the adapters root of tests that register adapters.

A Redis for the tests of what is shared through one: the suite's, or a throwaway one.

One real vLLM server for the whole session (it takes a minute or two to start on 2 cores) and
the gateway served by uvicorn in a thread, like `manage.py up` serves it, for the tests marked
`vllm`: serving's, the demo's traffic driver and the whole loop. vLLM serves the tiny base
model under the platform's base-model name, with runtime LoRA loading; adapters are real PEFT
directories (tests/serving/vllm_server.py). With cache_clock, the caches the gateway keeps in
this process run on a clock that the test moves forward instead of sleeping out their TTLs.
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from serving.gateway.database import close_connections
from serving.vllm_process import VllmOptions, VllmProcess, free_port
from tenants.models import Role
from tests.factories import Tenant, make_tenant
from tests.serving import gateway_thread
from tests.serving.gateway_thread import GatewayServer
from tests.serving.vllm_server import BASE_NAME, Vllm

BROWSER_TESTS = Path(__file__).parent / "console" / "browser"


# What reaches the database: pytest-django refuses any other test a query.
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server"}


def pytest_itemcollected(item):
    """A test that cannot reach the database checks nothing the database changes: it is marked
    one_database, so that CI runs it in one of its two passes (.ci/run)."""
    if not DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())) and not item.get_closest_marker("django_db"):
        item.add_marker(pytest.mark.one_database)


@pytest.hookimpl(trylast=True)  # after pytest-django's own ordering (database tests first)
def pytest_collection_modifyitems(items):
    """Browser tests last: Playwright leaves an event loop in the tests' thread for the rest of
    the session, beside which Django's ORM needs to be told it is safe (console/browser/conftest.py)."""
    items.sort(key=lambda item: BROWSER_TESTS in Path(item.path).parents)


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


# Redis -------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    """The suite's Redis when it runs on one (CELERY_BROKER_URL), else a throwaway redis-server
    (scripts/services installs it; a missing one fails the tests that need it, never skips them)."""
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if broker.startswith("redis://"):
        yield broker
        return
    assert shutil.which("redis-server"), "redis-server is missing: scripts/services start installs it"
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path_factory.mktemp("redis"))], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() != "PONG":
        assert time.monotonic() < deadline and server.poll() is None, "redis-server did not start"
        time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    server.terminate()
    server.wait(timeout=10)


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


# The session's vLLM and the gateway ---------------------------------------------------------


@pytest.fixture(scope="session")
def vllm(tmp_path_factory, tiny_base_model) -> Vllm:
    workdir, base = tmp_path_factory.mktemp("vllm"), tiny_base_model
    options = VllmOptions(model=base, served_name=BASE_NAME, max_loras=4, max_lora_rank=8, api_key=django_settings.SERVING_VLLM_API_KEY)
    with VllmProcess(options, log_path=workdir / "vllm.log") as process:
        yield Vllm(process=process, base_dir=base, workdir=workdir)


@pytest.fixture
def serving_settings(settings, vllm, tmp_path):
    """The platform pointed at the session's vLLM and its base model, with adapters under this
    test's folder. Adapters leave vLLM after the test: the next test's database reuses their names."""
    settings.SERVING_VLLM_URLS = [vllm.url]
    settings.SERVING_BASE_MODEL_NAME = BASE_NAME
    settings.SERVING_BASE_MODEL_DIR = str(vllm.base_dir)
    settings.SERVING_ADAPTERS_ROOT = str(tmp_path / "adapters")
    yield settings
    vllm.unload_adapters()


@pytest.fixture(scope="session")
def gateway_server(django_db_setup) -> str:
    """The ASGI application under uvicorn in a thread, sharing this process's settings and
    test database (its requests come only from tests that hold `transactional_db`)."""
    server = gateway_thread.running = GatewayServer().start()
    yield server.url
    server.stop()
    close_connections()


@pytest.fixture
def gateway(gateway_server, serving_settings, transactional_db) -> str:
    yield gateway_server
    gateway_thread.stop_watching()


class MovableClock:
    """time.monotonic, which a test may move forward: a cache's TTL passes at once, and between
    moves time runs as it does for the caches in production."""

    def __init__(self):
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.ahead

    def advance(self, seconds: float) -> None:
        self.ahead += seconds


@pytest.fixture
def cache_clock(monkeypatch) -> MovableClock:
    """The clock of the caches the gateway keeps in this process (keys, limits, routes): a test
    moves it forward by a cache's TTL where the gateway would see a change made elsewhere."""
    from serving import routing
    from serving.gateway import views

    clock = MovableClock()
    for cache in (views._principals, views._limits, views._over_quota, routing._routes):
        monkeypatch.setattr(cache, "clock", clock)
    return clock
