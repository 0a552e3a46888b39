"""A `scripts/cluster up` started from Python, for the tests and benchmarks that drive one:
started in the background until its ready line, read through its cluster.json, Ctrl-C'd on the
way out."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunningCluster:
    process: subprocess.Popen
    url: str
    manifest_path: Path
    output: list[str] = field(default_factory=list)  # its standard output, line by line

    @property
    def manifest(self) -> dict:
        return json.loads(self.manifest_path.read_text())

    @property
    def env(self) -> dict[str, str]:
        """This environment with the settings every service got: what `manage.py` needs to act on it."""
        return {**os.environ, **self.manifest["env"], "LOG_LEVEL": "WARNING"}

    def service(self, name: str) -> dict:
        return next(service for service in self.manifest["services"] if service["name"] == name)

    def manage(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed: {done.stderr[-3000:]}")
        return done.stdout

    def log(self, name: str) -> str:
        return (self.manifest_path.parent / "logs" / f"{name}.log").read_text(errors="replace")

    def stop(self, timeout: float = 120) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout=timeout)


@contextmanager
def running_cluster(*args: str, data_dir: Path, env: dict | None = None, ready_timeout: float = 900) -> Iterator[RunningCluster]:
    """`scripts/cluster up --data-dir DATA_DIR ARGS...` until its ready line; stopped afterwards."""
    process = subprocess.Popen(
        [str(ROOT / "scripts" / "cluster"), "up", "--data-dir", str(data_dir), *args], cwd=ROOT, env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )
    output: list[str] = []
    manifest = None
    timer = threading.Timer(ready_timeout, lambda: os.killpg(process.pid, signal.SIGINT))
    timer.start()
    try:
        for line in process.stdout:
            output.append(line.rstrip("\n"))
            if line.startswith("cluster: "):
                manifest = Path(line.split(": ", 1)[1].strip())
            if line.startswith("ready: "):
                break
    finally:
        timer.cancel()
    if not output or not output[-1].startswith("ready: "):
        process.wait(timeout=120)
        raise RuntimeError(f"scripts/cluster did not get ready (see {data_dir / 'logs'}): {output}")
    threading.Thread(target=lambda: output.extend(line.rstrip("\n") for line in process.stdout), daemon=True).start()
    cluster = RunningCluster(process=process, url=output[-1].split(": ", 1)[1], manifest_path=manifest, output=output)
    try:
        yield cluster
    finally:
        cluster.stop()


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def accepts(url: str) -> bool:
    """Something listens at the URL's host and port (PostgreSQL, Redis)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def children(pid: int) -> list[int]:
    """A process's children (a gunicorn master's workers)."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def wait_until(condition, *, timeout: float, what: str, every: float = 0.5) -> float:
    """Seconds until `condition()` held; raises TimeoutError naming `what` after `timeout`."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(every)
    return time.monotonic() - started
