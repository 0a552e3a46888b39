"""`manage.py up` (SPEC 8): starts the platform, prints the ready line, serves the public
API, and stops everything it started on Ctrl-C.

It is pointed at the session's vLLM as a remote replica, so that the suite starts vLLM only
once; starting vLLM itself is VllmProcess's, which that fixture uses.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from serving.vllm_process import free_port
from tests.serving.vllm_server import BASE_NAME

pytestmark = [pytest.mark.vllm, pytest.mark.one_database]  # manage.py up runs the embedded default

REPO_ROOT = Path(__file__).resolve().parents[2]


def platform_env(data_dir: Path, vllm_url: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("DATABASE_", "CELERY_"))}
    return env | {
        "DJANGO_SETTINGS_MODULE": "controlplane.settings.base",
        "PLATFORM_DATA_DIR": str(data_dir),
        "PLATFORM_VLLM_URLS": vllm_url,
        "PLATFORM_BASE_MODEL_NAME": BASE_NAME,
        "PYTHONUNBUFFERED": "1",
    }


def descendants(pid: int) -> set[int]:
    """The processes started by `pid`, and theirs (Celery rewrites its environment and title,
    so parentage is what tells them apart)."""
    parents = {}
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit():
                parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    def running(pid: int) -> bool:
        try:
            return "zombie" not in Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False

    return {pid for pid in pids if running(pid)}


def read_until(process: subprocess.Popen, prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if line.startswith(prefix):
            return line.strip()
    raise AssertionError(f"no {prefix!r} line; output:\n{''.join(seen)}")


def test_up_serves_the_platform_and_stops_all_it_started(vllm, tmp_path):
    env, port = platform_env(tmp_path, vllm.url), free_port()
    up = subprocess.Popen([sys.executable, "manage.py", "up", "--port", str(port)], cwd=REPO_ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert read_until(up, "ready:", timeout=180) == f"ready: http://127.0.0.1:{port}"
        created = subprocess.run([sys.executable, "manage.py", "create_org", "--name", "Acme", "--owner-email", "o@acme.example"],
                                 cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True)
        key = json.loads(created.stdout)["api_key"]
        api = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key)
        completion = api.chat.completions.create(model="default", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        assert completion.model == BASE_NAME
        adapters = httpx.get(f"http://127.0.0.1:{port}/api/v1/adapters", headers={"Authorization": f"Bearer {key}"})
        assert adapters.status_code == 200 and adapters.json() == []
        started = descendants(up.pid)
        assert len(started) >= 3  # the web server, the worker (and its pool), the scheduler
    finally:
        up.send_signal(signal.SIGINT)
        output = up.communicate(timeout=90)[0]
    assert up.returncode == 0, output
    assert output.rstrip().endswith("stopped")
    assert alive(started) == set()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz")
