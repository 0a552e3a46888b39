"""Set up Django for a benchmark on a throwaway database (SQLite in a temp dir, or a fresh one on
DATABASE_URL's PostgreSQL server)."""

import atexit
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]


def throwaway_dir(prefix: str = "platform-bench-") -> str:
    """A temporary folder, removed when the benchmark exits (a run's database can be ~80 MB)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def serving_env(name: str) -> dict[str, str]:
    """For the serving benchmarks: a data folder of their own (whatever the environment names:
    they create organizations), the demo's base model, and per-organization limits out of the
    way (they measure the gateway and vLLM, not the limits)."""
    return {"PLATFORM_DATA_DIR": throwaway_dir(f"platform-bench-{name}-"), "PLATFORM_BASE_MODEL_NAME": "demo-base",
            "PLATFORM_REQUESTS_PER_MINUTE": "100000000", "PLATFORM_TOKENS_PER_MINUTE": "1000000000",
            "PLATFORM_MAX_CONCURRENT_REQUESTS": "1000"}


def demo_base_model() -> Path:
    """The demo's base model in the repository's data folder, built there if missing."""
    sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
    from demo.base_model import embedded_base_model

    return embedded_base_model(ROOT / ".data")


def throwaway_database(url: str) -> str:
    """A fresh database beside the one `url` names (PostgreSQL), dropped when the benchmark
    exits: a benchmark's organizations and interactions never land in the database it was given."""
    import psycopg

    name = f"bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    atexit.register(drop)
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def setup(*, env: dict[str, str] | None = None) -> None:
    """Django on a throwaway data folder (and a throwaway database where DATABASE_URL names a
    PostgreSQL server), with `env` set first (the processes a benchmark starts inherit it)."""
    sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
    os.environ.update(env or {})
    if "PLATFORM_DATA_DIR" not in os.environ:
        os.environ["PLATFORM_DATA_DIR"] = throwaway_dir()
    if os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        os.environ["DATABASE_URL"] = throwaway_database(os.environ["DATABASE_URL"])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.base")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
