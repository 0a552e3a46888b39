"""python manage.py up [--port P]: everything the platform needs, in the foreground.

Like `airflow standalone`: migrates the database, starts vLLM with the base model (unless
PLATFORM_VLLM_URLS names running replicas), loads every routed adapter into it, then the web
server (uvicorn, ASGI), two Celery workers (the default queue's and training's) and the
scheduler (beat). Prints `ready: http://127.0.0.1:<port>` once requests can be served, and on
Ctrl-C or SIGTERM stops all it started, web server first, vLLM last. If any of them dies, it
stops the rest and exits with an error naming it.
"""

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from controlplane.celery import ensure_broker_folders
from serving.deployments import adapters_sync
from serving.processes import stop_group
from serving.registry import base_model_dir
from serving.vllm_process import VllmOptions, VllmProcess, VllmStartError

STOP_TIMEOUT_S = 20.0


class Command(BaseCommand):
    help = "Start vLLM, the web server, the workers and the scheduler on these settings; stop them on Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000, help="the web server's port (default 8000)")
        parser.add_argument("--host", default="127.0.0.1")

    def handle(self, *args, port: int, host: str, **options):
        logs = Path(settings.DATA_DIR) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        stop = _stop_on_signals()
        call_command("migrate", verbosity=0)
        ensure_broker_folders()
        vllm = None
        children: list[_Child] = []
        try:
            if not settings.SERVING_VLLM_URLS:
                vllm = self._start_vllm(logs)
                settings.SERVING_VLLM_URLS = [vllm.base_url]
            env = {**os.environ, "PLATFORM_VLLM_URLS": ",".join(settings.SERVING_VLLM_URLS), "PYTHONUNBUFFERED": "1"}
            self.stdout.write(f"adapters loaded into vLLM: {adapters_sync()}")
            # One by one, so that if one fails to start, those already started are stopped.
            children.append(_Child("web server", [sys.executable, "-m", "uvicorn", "controlplane.asgi:application",
                                                  "--host", host, "--port", str(port), "--no-access-log"], env, logs / "web.log"))
            # Two workers, so that one organization's gates sample through vLLM while another's
            # candidate trains: as in production, where training workers own the accelerators.
            children.append(_worker("worker", settings.DEFAULT_QUEUE, env, logs / "worker.log"))
            children.append(_worker("training worker", settings.TRAINING_QUEUE, env, logs / "training-worker.log"))
            children.append(_Child("scheduler", [sys.executable, "-m", "celery", "-A", "controlplane", "beat", "--loglevel=INFO"],
                                   env, logs / "beat.log"))
            url = f"http://{host}:{port}"
            _wait_until_serving(url, children, stop)
            self.stdout.write(f"logs: {logs}")
            base_url = "" if url == settings.PUBLIC_URL else f" --base-url {url}"
            self.stdout.write(f"console: {url}/console/ (a way in: manage.py invite --org SLUG --email EMAIL{base_url})")
            self.stdout.write(f"ready: {url}", ending="\n")
            self.stdout.flush()
            while not stop.wait(0.5):
                if dead := next((child for child in children if child.exited()), None):
                    raise CommandError(f"The {dead.name} exited with code {dead.process.returncode}; see {dead.log_path}.")
                if vllm is not None and not vllm.running():
                    raise CommandError(f"vLLM exited; see {vllm.log_path}.")
        except VllmStartError as error:
            raise CommandError(str(error)) from None
        finally:
            for child in children:
                child.stop()
            if vllm is not None:
                vllm.stop()
            self.stdout.write("stopped")

    def _start_vllm(self, logs: Path) -> VllmProcess:
        model_dir = base_model_dir()
        options = VllmOptions(
            model=Path(model_dir), served_name=settings.SERVING_BASE_MODEL_NAME, max_loras=settings.SERVING_VLLM_MAX_LORAS,
            max_lora_rank=settings.SERVING_VLLM_MAX_LORA_RANK, kv_cache_gib=settings.SERVING_VLLM_KV_CACHE_GIB,
            api_key=settings.SERVING_VLLM_API_KEY,
        )
        self.stdout.write(f"starting vLLM with {model_dir} (log: {logs / 'vllm.log'}) ...")
        return VllmProcess(options, log_path=logs / "vllm.log").start()


def _worker(name: str, queue: str, env: dict, log_path: Path) -> "_Child":
    return _Child(name, [sys.executable, "-m", "celery", "-A", "controlplane", "worker", "--loglevel=INFO", "--concurrency=1",
                         "-Q", queue, "-n", f"{queue}@%h", "--without-gossip", "--without-mingle"], env, log_path)


class _Child:
    """A process of ours in its own process group, so that stopping it reaches what it forked."""

    def __init__(self, name: str, command: list[str], env: dict, log_path: Path):
        self.name, self.log_path = name, log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def exited(self) -> bool:
        return self.process.poll() is not None

    def stop(self) -> None:
        stop_group(self.process, timeout=STOP_TIMEOUT_S)


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def _wait_until_serving(url: str, children: list[_Child], stop: threading.Event, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        if dead := next((child for child in children if child.exited()), None):
            raise CommandError(f"The {dead.name} exited with code {dead.process.returncode}; see {dead.log_path}.")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise CommandError(f"The web server did not answer within {timeout:.0f} s; see its log.")
        time.sleep(0.25)
    raise CommandError("Interrupted before the platform was ready.")
