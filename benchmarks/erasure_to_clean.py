"""From an erasure to a clean version serving, in the demo's settings.

    .venv/bin/python benchmarks/erasure_to_clean.py [--persona camel_two_space] [--requests 300] [--port 8010]

Starts the platform as `scripts/demo` does (`manage.py up`, its own data directory, the demo's
base model, the scheduler ticking every 10 s), with one simulated organization whose training
schedule is off. A base round of traffic, then cycles until a candidate passes its gates (v1,
promoted by hand: how good it is does not matter here), and a round it serves. Then an admin
erases one interaction v1 was trained on (`DELETE /api/v1/interactions/<id>`), and the clock
starts: under the default privacy policy (`tainted_adapters: retrain`) the platform starts a
cycle from the base model by itself; the organization's users keep calling, round after round
as in the demo, until a version no erasure reached serves them (an admin asks again if that
cycle ends without one). Prints the time and where it went (to the cycle's start, training,
gates, deploy, canary), and JSON with --json.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from demo.http import Api  # noqa: E402
from demo.launch import create_org, running_platform, use_fresh_data_dir  # noqa: E402
from demo.loop import CANARY_LATENCY_MARGIN, TERMINAL, TICK_S, time_out_canary, traffic_round, wait_for  # noqa: E402
from demo.personas import Persona  # noqa: E402
from demo.traffic import SimulatedOrg  # noqa: E402

MAX_TRIES = 3  # cycles to get a first promoted version, before the erasure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persona", default="camel_two_space")
    parser.add_argument("--requests", type=int, default=300, help="calls per round, as in the demo")
    parser.add_argument("--port", type=int, default=8010)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    use_fresh_data_dir("erasure")
    os.environ.setdefault("PLATFORM_TRAINING_TICK_S", str(TICK_S))
    rounds, seed = [], 0
    with running_platform(args.port) as url:
        created = create_org(args.persona)
        org = SimulatedOrg(args.persona, Persona.load(args.persona), created["api_key"])
        api = Api(url, org.api_key)
        api.put("/api/v1/training-schedule", {"enabled": False})  # the erasure's cycle is the only one the platform starts
        api.put("/api/v1/canary-policy", {"latency": CANARY_LATENCY_MARGIN})

        def round_of_traffic(label: str) -> None:
            nonlocal seed
            seed += 1
            traffic_round(url, [org], label, requests=args.requests, seed=seed, rounds=rounds)

        round_of_traffic("base model")
        first = None
        for _ in range(MAX_TRIES):  # a version to erase from: the first to pass its gates, promoted by hand
            first = wait_for(api, api.post("/api/v1/cycles", {})["id"], until=("canary", *TERMINAL))
            if first["status"] == "canary":
                api.post(f"/api/v1/adapters/{first['adapter']}/promote", {})
                first = wait_for(api, first["id"], until=TERMINAL)  # the next tick sees the promotion
                break
        if first["status"] != "promoted":
            raise SystemExit(f"No candidate passed its gates in {MAX_TRIES} cycles; nothing to erase from.")
        round_of_traffic(f"{first['adapter']} serving")

        run = api.get(f"/api/v1/training-runs/{first['training_run']}")
        erased = run["interaction_ids"][len(run["interaction_ids"]) // 2]
        erased_at = time.monotonic()
        assert api.status_of("DELETE", f"/api/v1/interactions/{erased}") == 204
        print(f"\n== erased {erased}, one of the {len(run['interaction_ids'])} interactions {first['adapter']} was trained on", flush=True)

        retrain = None
        while retrain is None:  # the platform starts it at once, on the erasure's commit
            retrain = next((c for c in api.get("/api/v1/cycles")["results"] if c["trigger"] == "erasure"), None)
            time.sleep(0.5)
        started_after = time.monotonic() - erased_at
        done = run_cycle(api, retrain["id"], round_of_traffic)
        tries = [done]
        while done["status"] != "promoted" and len(tries) < MAX_TRIES:  # as an admin would: ask again
            done = run_cycle(api, api.post("/api/v1/cycles", {})["id"], round_of_traffic)
            tries.append(done)
        clean_after = time.monotonic() - erased_at
        adapters = {a["name"]: a for a in api.get("/api/v1/adapters")}
    serving = next((a for a in adapters.values() if a["status"] == "serving"), None)
    result = {
        "persona": args.persona, "requests_per_round": args.requests, "erased_from": first["adapter"],
        "cycle_started_after_s": round(started_after, 1), "clean_version": serving["name"] if serving else None,
        "clean_version_tainted": serving["tainted"] if serving else None, "clean_serving_after_s": round(clean_after, 1),
        "cycles": [{"status": c["status"], "adapter": c["adapter"], "stage_seconds": c["stage_seconds"]} for c in tries],
        "tainted": {name: a["tainted"] for name, a in adapters.items() if a["tainted"]},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"\nerasure -> clean version serving: {result['clean_serving_after_s']:.0f} s "
          f"(the retrain cycle started {result['cycle_started_after_s']:.1f} s after the erasure)")
    for cycle in result["cycles"]:
        stages = ", ".join(f"{k} {v:.0f} s" for k, v in cycle["stage_seconds"].items() if v is not None)
        print(f"  cycle -> {cycle['status']} ({cycle['adapter']}): {stages}")
    print(f"  serving: {result['clean_version']}, tainted: {result['clean_version_tainted']}; tainted versions: {result['tainted']}")


def run_cycle(api: Api, cycle_id: str, round_of_traffic) -> dict:
    """Wait for the cycle's gates, give its canary rounds of traffic until a verdict (up to 5),
    and return the cycle at its end."""
    cycle = wait_for(api, cycle_id, until=("canary", *TERMINAL))
    for extra in range(5):
        if cycle["status"] != "canary":
            break
        round_of_traffic(f"{cycle['adapter']} in canary" + (f", more ({extra})" if extra else ""))
        time.sleep(3 * TICK_S)  # the scheduler's tick judges the canary
        cycle = api.get(f"/api/v1/cycles/{cycle_id}")
    if cycle["status"] == "canary":
        time_out_canary(api)  # as the demo does: the next tick decides
        cycle = wait_for(api, cycle_id, until=TERMINAL)
        api.put("/api/v1/canary-policy", {"max_hours": None})
    print(f"  cycle {cycle_id}: {cycle['status']} ({cycle['adapter']})", flush=True)
    return cycle


if __name__ == "__main__":
    main()
