"""The specialization loop on simulated organizations, through the public contract only.

Runs `manage.py up` in a data directory of its own (vLLM with the base model, built first if
missing; web server; worker; scheduler) and creates one organization per persona with `create_org`, opted in to training
with its schedule off, so that the cycles below are the only ones. Then:

    round 0      each organization's users call the gateway (served by the base model) and
                 give their feedback, late events included, hours compressed into seconds
    cycle k      each organization's training run on what it was served since the last one
                 (POST /api/v1/training-runs), its candidate promoted by hand
                 (POST /api/v1/adapters/<name>/promote), then round k on the new adapter

and prints each organization's edit-persisted rate per round, with 95 % confidence intervals.
Each round's interactions are the next cycle's on-policy data. Stops the platform at the end.

    python -m demo.loop [--cycles 3] [--requests 400] [--port 8000]
"""

import argparse
import time
from collections.abc import Sequence

from demo.http import Api, ApiError
from demo.launch import create_org, running_platform, use_fresh_data_dir
from demo.personas import Persona
from demo.traffic import OrgTraffic, SimulatedOrg, run_traffic, wilson_interval

PERSONAS = ("typed_snake", "camel_two_space", "tab_terse")
RUN_TIMEOUT_S = 1800
POLL_S = 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=3, help="training cycles (default 3)")
    parser.add_argument("--requests", type=int, default=400, help="gateway calls per organization per round (default 400)")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    started = time.monotonic()
    print(f"data directory of this run: {use_fresh_data_dir('loop')}")
    with running_platform(args.port) as url:
        orgs = [SimulatedOrg(name, Persona.load(name), create_org(name)) for name in PERSONAS]
        for org in orgs:
            Api(url, org.api_key).put("/api/v1/training-schedule", {"enabled": False})
        rounds = [traffic_round(url, orgs, "base model", requests=args.requests, seed=0)]
        for cycle in range(1, args.cycles + 1):
            print(f"\n== cycle {cycle}: training", flush=True)
            for org, run in zip(orgs, train_and_promote(url, orgs), strict=True):
                print("  " + describe_run(org.name, run))
            rounds.append(traffic_round(url, orgs, f"cycle {cycle}", requests=args.requests, seed=cycle))
    print("\n" + format_rates([label for label, _ in rounds], {org.name: [traffic[org.name] for _, traffic in rounds] for org in orgs}))
    print(f"\n{time.monotonic() - started:.0f} s in all")


def traffic_round(url: str, orgs: Sequence[SimulatedOrg], label: str, *, requests: int, seed: int) -> tuple[str, dict[str, OrgTraffic]]:
    print(f"\n== round '{label}': {requests} calls per organization", flush=True)
    started = time.monotonic()
    traffic = run_traffic(url=url, orgs=orgs, requests=requests, concurrency=4, seed=seed, time_scale=2e-4, task_share=0.1)
    for org in orgs:
        t = traffic[org.name]
        print(f"  {org.name:<16} served by {dict(t.by_model)}  edit persisted {t.edit_persisted_rate:.3f}  "
              f"dissatisfied {t.dissatisfied_rate:.3f}  failures {sum(t.failures.values())}")
    print(f"  {time.monotonic() - started:.0f} s", flush=True)
    return label, traffic


def train_and_promote(url: str, orgs: Sequence[SimulatedOrg]) -> list[dict]:
    """One training run per organization, all queued at once (the workers take them in turn);
    each successful run's candidate is promoted. Returns each organization's finished run."""
    apis = [Api(url, org.api_key) for org in orgs]
    run_ids = [api.post("/api/v1/training-runs", {})["id"] for api in apis]
    finished = [wait_for_run(api, run_id) for api, run_id in zip(apis, run_ids, strict=True)]
    for api, run in zip(apis, finished, strict=True):
        if run["status"] == "succeeded":
            api.post(f"/api/v1/adapters/{run['candidate']}/promote", {})
    return finished


def wait_for_run(api: Api, run_id: str) -> dict:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            run = api.get(f"/api/v1/training-runs/{run_id}")
        except ApiError as error:  # the web server may be busy: the run goes on regardless
            print(f"  (reading run {run_id}: {error})")
        else:
            if run["status"] in ("succeeded", "failed"):
                return run
        time.sleep(POLL_S)
    raise SystemExit(f"Training run {run_id} did not finish within {RUN_TIMEOUT_S} s.")


def describe_run(org: str, run: dict) -> str:
    if run["status"] != "succeeded":
        return f"{org:<16} run failed: {run['error']}"
    report, dataset = run["report"] or {}, run["dataset"] or {}
    seconds = report.get("seconds", {})
    return (f"{org:<16} {run['incumbent'] or 'base'} -> {run['candidate']}: {dataset.get('examples')} examples "
            f"({dataset.get('off_policy')} off-policy), {report.get('steps')} steps, "
            f"train {seconds.get('train', 0):.1f} s at {report.get('tokens_per_second', 0):.0f} tokens/s, "
            f"KL {report.get('mean_kl', 0):.4f}")


def format_rates(labels: Sequence[str], rounds_by_org: dict[str, Sequence[OrgTraffic]]) -> str:
    """Each organization's edit-persisted rate per round, with its 95 % Wilson interval."""
    def cell(traffic: OrgTraffic) -> str:
        persisted = traffic.events.get("edit_persisted", 0)
        low, high = wilson_interval(persisted, traffic.served)
        return f"{traffic.edit_persisted_rate:.3f} [{low:.3f}, {high:.3f}]"

    rows = [["organization", *labels]] + [[org, *(cell(t) for t in rounds)] for org, rounds in rounds_by_org.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)) for row in rows]
    return "edit-persisted rate per round (95 % confidence interval)\n" + "\n".join(lines)


if __name__ == "__main__":
    main()
