"""A real Celery worker process for tests, on the test process's own database and broker.

    with running_worker() as worker:
        some_task.delay()
        worker.wait_until(lambda: ..., timeout=60)

The worker is `python -m celery -A controlplane worker --pool=solo` started from the repository
root. It gets a DATABASE_URL built from the test connection (the test database: a file for
SQLite, `test_<name>` for PostgreSQL), the test process's broker, and the PLATFORM_DATA_DIR,
PLATFORM_MASTER_KEYS and DJANGO_SECRET_KEY that settings/test.py put into os.environ, so it
shares the filesystem broker's folders and the encryption keys. Tests that use it need
`transactional_db` (rows must be committed for the worker to see them).

The worker is always stopped when the block ends; if the block raises, the worker's output
is printed, so that pytest shows it with the failure.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from controlplane.celery import ensure_broker_folders

REPO_ROOT = Path(__file__).resolve().parents[1]
PASSED_THROUGH = ("PLATFORM_DATA_DIR", "PLATFORM_MASTER_KEYS", "DJANGO_SECRET_KEY")
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


def worker_database_url() -> str:
    """A DATABASE_URL for the database this test process is connected to (the test one)."""
    s = connection.settings_dict
    engine = s["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        name = str(s["NAME"])
        if name == ":memory:" or name.startswith("file:"):
            raise RuntimeError(f"A worker process cannot share the in-memory SQLite database {name!r}.")
        return "sqlite:///" + str(Path(name).resolve())
    if engine == "django.db.backends.postgresql":
        user = quote(s.get("USER") or "", safe="")
        password = quote(s.get("PASSWORD") or "", safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = s.get("HOST") or "localhost"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        port = f":{s['PORT']}" if s.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{quote(s['NAME'], safe='')}"
    raise RuntimeError(f"No DATABASE_URL for database engine {engine}.")


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    missing = [name for name in PASSED_THROUGH if not os.environ.get(name)]
    if missing:
        raise RuntimeError(f"settings/test.py should have set {', '.join(missing)} in os.environ")
    pythonpath = [str(REPO_ROOT), str(REPO_ROOT / "platform")]
    if env.get("PYTHONPATH"):
        pythonpath.append(env["PYTHONPATH"])
    env.update(
        PYTHONPATH=os.pathsep.join(pythonpath),
        DJANGO_SETTINGS_MODULE="controlplane.settings.test",
        DATABASE_URL=worker_database_url(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        PYTHONUNBUFFERED="1",
    )
    return env


class Worker:
    def __init__(self, process: subprocess.Popen):
        self.process = process
        self._lines: list[str] = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, name="celery-worker-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._lines.append(line)
            if " ready." in line:
                self._ready.set()

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return "".join(self._lines)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.1):
            if self.process.poll() is not None:
                raise RuntimeError(f"The Celery worker exited with code {self.process.returncode} before it was ready.")
            if time.monotonic() > deadline:
                raise TimeoutError(f"The Celery worker was not ready after {timeout:.0f}s.")

    def wait_until(self, condition: Callable[[], bool], timeout: float = 60.0, interval: float = 0.2, what: str = "condition") -> None:
        """Poll `condition` until it is true; fail early if the worker has died."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None:
                raise AssertionError(f"The Celery worker exited with code {self.process.returncode} while waiting for {what}.")
            if time.monotonic() > deadline:
                raise AssertionError(f"Timed out after {timeout:.0f}s waiting for {what}.")
            time.sleep(interval)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to the worker (and anything it started), e.g. to kill it mid-task."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """Warm shutdown (SIGTERM), then SIGKILL if it does not exit in time."""
        if self.process.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                self.process.wait(timeout)
        self._reader.join(5)
        return self.process.returncode


def worker_command(*extra: str) -> list[str]:
    return [
        sys.executable, "-m", "celery", "-A", "controlplane", "worker",
        "--pool=solo", "--concurrency=1", "-Q", ",".join(settings.WORKER_QUEUES), "--loglevel=INFO",
        "--without-heartbeat", "--without-mingle", "--without-gossip",
        *extra,
    ]


@contextmanager
def running_worker(*extra_args: str, wait_ready: bool = True, env: dict[str, str] | None = None) -> Iterator[Worker]:
    """Start a real Celery worker on the test database and broker; stop it when the block ends.
    `env` adds settings of its own (PLATFORM_... variables): the test's settings fixture does not
    reach another process."""
    assert not getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False), "tasks would run in the test process, not the worker"
    ensure_broker_folders()
    process = subprocess.Popen(
        worker_command(*extra_args),
        cwd=REPO_ROOT,
        env={**worker_env(), **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,  # its own process group, so kill() reaches all of it
    )
    worker = Worker(process)
    failed = True
    try:
        if wait_ready:
            worker.wait_ready()
        yield worker
        failed = False
    finally:
        code = worker.stop()
        if failed:
            print(f"----- Celery worker output (pid {worker.pid}, exit code {code}) -----")
            print(worker.output() or "(no output)")
            print("----- end of Celery worker output -----")
