"""The platform as a demo starts it: `manage.py up` in the background and `manage.py create_org`,
the two commands of the public contract (SPEC 8), in a data directory of the demo run's own."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("PLATFORM_DATA_DIR", ROOT / ".data"))
READY_TIMEOUT_S = 600


def use_fresh_data_dir(name: str) -> Path:
    """Point the platform this process starts at a new data directory (database, broker, adapters),
    so that each demo run starts from nothing and earlier runs' organizations do not train
    beside it; only the base model is shared, built here first if missing (about 10 minutes on
    2 cores, once)."""
    from demo.base_model import embedded_base_model

    base_model = embedded_base_model(DATA_DIR)
    run_dir = DATA_DIR / "demo-runs" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True)
    os.environ.update(PLATFORM_DATA_DIR=str(run_dir), PLATFORM_BASE_MODEL_DIR=str(base_model))
    return run_dir


CONSOLE_ADMIN = "admin@demo.example"  # the person watching the demo in the console


def create_org(persona: str) -> dict:
    """A new organization, opted in to training, through `manage.py create_org`: its slug and
    API key as the command prints them ({"org", "api_key"})."""
    return _manage("create_org", "--name", f"{persona} {uuid.uuid4().hex[:4]}",
                   "--owner-email", f"owner@{persona.replace('_', '-')}.example", "--training-enabled")


def invite_console_admin(slugs: Sequence[str], *, url: str) -> str:
    """Make CONSOLE_ADMIN an admin of each organization, through `manage.py invite`; the first
    link, which sets their password (the console's switcher reaches the others)."""
    links = [_manage("invite", "--org", slug, "--email", CONSOLE_ADMIN, "--role", "admin", "--base-url", url)["url"] for slug in slugs]
    return links[0]


def _manage(*args: str) -> dict:
    output = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], check=True, capture_output=True, text=True).stdout
    return json.loads(output)


@contextmanager
def running_platform(port: int) -> Iterator[str]:
    """`manage.py up` in the background until its ready line; Ctrl-C'd (SIGINT) on the way out."""
    up = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "up", "--port", str(port)], cwd=ROOT,
                          env={**os.environ, "LOG_LEVEL": "WARNING"}, stdout=subprocess.PIPE, text=True)
    try:
        yield _ready_url(up)
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()


def _ready_url(up: subprocess.Popen) -> str:
    deadline = time.monotonic() + READY_TIMEOUT_S
    for line in up.stdout:
        print(f"  [up] {line.rstrip()}", flush=True)
        if line.startswith("ready: "):
            return line.removeprefix("ready: ").strip()
        if time.monotonic() > deadline:
            break
    raise SystemExit(f"`manage.py up` did not get ready (exit code {up.poll()}); see {os.environ.get('PLATFORM_DATA_DIR')}/logs/.")
