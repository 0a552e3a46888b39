"""The specialization loop on simulated organizations, through the public contract only.

Runs `manage.py up` in a data directory of its own (vLLM with the base model, built first if
missing; web server; worker; scheduler) and creates one organization per persona with
`create_org`, opted in to training with its schedule off, so that the cycles below are the only
ones; plus one with a naive reward spec (no penalty for invalid tool calls or for asking, a
heavy one for a rejected edit). Then:

    round 0      each organization's users call the gateway (the base model serves) and give
                 their feedback, late events included, hours compressed into seconds
    cycle k      POST /api/v1/cycles for each organization: train on what it was served since
                 the last cycle, gates, then a canary on half of its end users during round k,
                 promoted as soon as it is shown better, rolled back as soon as it is shown
                 worse (from then on the winner serves everyone); one still without a verdict
                 after its extra rounds of traffic is timed out by the organization's admin
                 (its canary policy's max_hours shortened to what has passed)
    final round  everyone on what their organization serves now
    matrix       each organization's adapter on the other organizations' users (on its own:
                 the final round)

and prints the A/B table (base vs. final, with deltas and 95 % intervals), the matrix, the
naive organization's detector figures and verdicts per cycle, and the cycles' stage times; it
writes every round's figures as JSON after each round, and the A/B table at the end (`results.json`
in the run's data directory unless --results says where), for benchmarks/plot_loop.py. Stops the platform at the
end, or with --keep stays up until Ctrl-C.

Once the organizations exist it prints the console's address and an invitation link for
admin@demo.example, an admin of all of them: open it to set a password and watch the cycles,
gate reports and canaries as they happen.

    python -m demo.loop [--cycles 3] [--requests 300] [--port 8000] [--results PATH] [--keep]

Hours of production are compressed into seconds: the scheduler ticks every 10 s (by default a
minute), and a canary gets a few rounds of traffic instead of up to a week.
"""

import argparse
import json
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from demo.http import Api, ApiError
from demo.launch import CONSOLE_ADMIN, create_org, invite_console_admin, running_platform, use_fresh_data_dir
from demo.personas import Persona
from demo.traffic import OrgTraffic, SimulatedOrg, run_traffic
from demo.traffic.stats import format_rate, latency_difference, rate_difference

PERSONAS = ("typed_snake", "camel_two_space", "tab_terse")
NAIVE = "naive"  # an organization whose admin forgot to penalize invalid tool calls and needless asks
NAIVE_PERSONA = "typed_snake"  # strict users: most edits are rejected, so a spec without penalties pays asking and invalid calls more than editing
# ...and that punishes a rejected edit hard: without that, it gamed its reward too slowly for the
# gates to block it reliably (docs/figures.md, "Reward weights").
NAIVE_SPEC = {"weights": {"tool_call_invalid": 0.0, "dissatisfied_followup": 0.0, "edit_rejected": -1.0}}
TERMINAL = ("promoted", "blocked", "rolled_back", "failed")
WAIT_S = 1800
TICK_S = 10  # the scheduler's tick, which judges canaries: every minute by default, hours are seconds here
VERDICT_WAIT_S = 3 * TICK_S
# Once dissatisfied follow-ups are rare (5-7 % in late cycles), showing a candidate within the
# guardrail's 2-point margin takes 400-700 outcomes an arm: with 4 extra rounds (~300), a candidate
# already shown better timed out (docs/figures.md, "Run V"). A round that no canary needs is not run.
MAX_EXTRA_ROUNDS = 10
# The canary's latency margin, relative: on vLLM-CPU an adapter costs some 15 % against the base
# model (a run's canary: 973 vs. 839 ms), and the default 0.25 could not be shown within the
# demo's rounds, so a candidate 12 points better timed out. On GPUs the default fits.
CANARY_LATENCY_MARGIN = 0.5
CANARY_TIME_OUT_HOURS = 0.01  # 36 s: less than any canary of the demo has run by the end of its rounds
POLL_S = 3.0
CONCURRENCY = 8  # calls in flight per organization: vLLM batches them, and the round takes less of the demo's time
MATRIX_REQUESTS = 50  # per off-diagonal cell: enough to tell 0-3 % from its own users' 30-40 %
RESULTS_FORMAT = 1  # of the results file; benchmarks/plot_loop.py reads it
_AB_RATES = ("edit persisted", "edit persisted, clear prompts", "dissatisfied follow-up", "background task success")  # the A/B table's rates, in order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=3, help="specialization cycles (default 3)")
    # 300: a cycle's served examples are what its update is short of; about 270 of 300 train
    # (docs/figures.md, "Examples per cycle").
    parser.add_argument("--requests", type=int, default=300, help="gateway calls per organization per round (default 300)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--results", type=Path, help="where to write the figures as JSON (default: results.json in the run's data directory)")
    parser.add_argument("--keep", action="store_true", help="keep the platform up after the report, until Ctrl-C, to look around the console")
    args = parser.parse_args()
    exit_on_signals()
    started = time.monotonic()
    run_dir = use_fresh_data_dir("loop")
    print(f"data directory of this run: {run_dir}", flush=True)
    rounds: list[tuple[str, dict[str, OrgTraffic]]] = []  # every round's figures, in order, for the results file
    results = args.results or run_dir / "results.json"
    os.environ.setdefault("PLATFORM_TRAINING_TICK_S", str(TICK_S))
    with running_platform(args.port) as url:
        ready = time.monotonic()
        created = {name: create_org(name) for name in (*PERSONAS, NAIVE)}
        orgs = [SimulatedOrg(name, Persona.load(NAIVE_PERSONA if name == NAIVE else name), created[name]["api_key"]) for name in created]
        print(f"\nconsole: {url}/console/ — to watch the loop, open this link and choose a password for {CONSOLE_ADMIN}, "
              f"an admin of the demo's organizations:\n  {invite_console_admin([c['org'] for c in created.values()], url=url)}", flush=True)
        apis = {org.name: Api(url, org.api_key) for org in orgs}
        for api in apis.values():
            api.put("/api/v1/training-schedule", {"enabled": False})
            api.put("/api/v1/canary-policy", {"latency": CANARY_LATENCY_MARGIN})
        apis[NAIVE].put("/api/v1/reward-spec", NAIVE_SPEC)

        base = traffic_round(url, orgs, "base model", requests=args.requests, seed=0, rounds=rounds, results=results)
        history: dict[str, list[dict]] = {org.name: [] for org in orgs}
        for k in range(1, args.cycles + 1):
            print(f"\n== cycle {k}: train, gates", flush=True)
            ids = {name: api.post("/api/v1/cycles", {})["id"] for name, api in apis.items()}
            gated = {name: wait_for(apis[name], ids[name], until=("canary", *TERMINAL)) for name in ids}
            for name, cycle in gated.items():
                print("  " + describe_gates(name, cycle))
            traffic_round(url, orgs, f"cycle {k} (canaries live)", requests=args.requests, seed=k, rounds=rounds, results=results)
            for extra in range(1, MAX_EXTRA_ROUNDS + 1):  # a canary waits for enough settled outcomes in each arm
                waiting = still_in_canary(apis, ids, orgs)
                if not waiting:
                    break
                traffic_round(url, waiting, f"cycle {k}, more canary traffic", requests=args.requests // 2, seed=100 * k + extra,
                              rounds=rounds, results=results)
            timed_out = still_in_canary(apis, ids, orgs)  # after all its traffic
            for org in timed_out:
                time_out_canary(apis[org.name])
            for name in ids:
                history[name].append(wait_for(apis[name], ids[name], until=TERMINAL))
                print("  " + describe_outcome(name, history[name][-1]))
            for org in timed_out:
                apis[org.name].put("/api/v1/canary-policy", {"max_hours": None})  # the default again
        final = traffic_round(url, orgs, "final", requests=args.requests, seed=args.cycles + 1, rounds=rounds, results=results)
        live = {name: api.get("/api/v1/live-figures?days=1")["models"] for name, api in apis.items()}  # before the matrix's traffic
        serving = {org.name: apis[org.name].get("/api/v1/adapters") for org in orgs}
        matrix = measure_matrix(url, [org for org in orgs if org.name != NAIVE], serving)
        print("\n" + ab_table(base, final))
        print("\n" + matrix_table({**matrix, **{(name, name): final[name] for name in PERSONAS}}))
        print("\n" + live_table(live))
        print("\n" + naive_table(history[NAIVE]))
        print("\n" + cycle_times(history))
        print(f"\n{time.monotonic() - started:.0f} s in all, of which {ready - started:.0f} s to start the platform "
              f"(building the base model when it is missing)")
        write_results(results, results_document(rounds, base, final, live))
        print(f"results: {results}")
        if args.keep:
            stay_up(url)


def exit_on_signals() -> None:
    """A kill (SIGTERM) or an interrupt unwinds the demo as Ctrl-C does, through
    running_platform, which stops the platform it started: a shell's background job starts
    with SIGINT ignored, and SIGTERM ended the demo at once, leaving `manage.py up` running."""
    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, leave)


def stay_up(url: str) -> None:
    """Until Ctrl-C or SIGTERM: handled here, since a shell's background job starts with SIGINT ignored."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print(f"\nThe platform stays up at {url} (console: {url}/console/) until Ctrl-C.", flush=True)
    while not stop.wait(1):
        pass
    print("stopping the platform", flush=True)


def traffic_round(url: str, orgs: Sequence[SimulatedOrg], label: str, *, requests: int, seed: int,
                  rounds: list[tuple[str, dict[str, OrgTraffic]]], results: Path) -> dict[str, OrgTraffic]:
    """One round of every organization's traffic, printed, appended to `rounds` and written to
    `results` (so a run stopped early still leaves its rounds' figures)."""
    print(f"\n== round '{label}': {requests} calls per organization", flush=True)
    started = time.monotonic()
    traffic = run_traffic(url=url, orgs=orgs, requests=requests, concurrency=CONCURRENCY, seed=seed, time_scale=2e-4, task_share=0.1)
    for org in orgs:
        t = traffic[org.name]
        print(f"  {org.name:<16} served by {dict(t.by_model)}  edit persisted {t.edit_persisted_rate:.3f} "
              f"({t.edit_persisted_on_clear_rate:.3f} on clear prompts)  dissatisfied {t.dissatisfied_rate:.3f}  failures {sum(t.failures.values())}")
    print(f"  {time.monotonic() - started:.0f} s", flush=True)
    rounds.append((label, traffic))
    write_results(results, results_document(rounds))
    return traffic


def still_in_canary(apis: dict[str, Api], ids: dict[str, str], orgs: Sequence[SimulatedOrg]) -> list[SimulatedOrg]:
    """The organizations whose canary has no verdict after VERDICT_WAIT_S (the tick judges them)."""
    deadline = time.monotonic() + VERDICT_WAIT_S
    while True:
        waiting = [org for org in orgs if apis[org.name].get(f"/api/v1/cycles/{ids[org.name]}")["status"] == "canary"]
        if not waiting or time.monotonic() > deadline:
            return waiting
        time.sleep(POLL_S)


def time_out_canary(api: Api) -> None:
    """No verdict on all the traffic the demo gives a canary: its admin shortens the canary's
    time limit to what has passed (the verdict uses the policy of the moment), so the next tick
    stops it by the platform's own rule, unless it decided meanwhile."""
    api.put("/api/v1/canary-policy", {"max_hours": CANARY_TIME_OUT_HOURS})


def wait_for(api: Api, cycle_id: str, *, until: Sequence[str]) -> dict:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            cycle = api.get(f"/api/v1/cycles/{cycle_id}")
        except ApiError as error:  # the web server may be busy: the cycle goes on regardless
            print(f"  (reading cycle {cycle_id}: {error})")
        else:
            if cycle["status"] in until:
                return cycle
        time.sleep(POLL_S)
    raise SystemExit(f"Cycle {cycle_id} did not reach {'/'.join(until)} within {WAIT_S} s.")


def describe_gates(org: str, cycle: dict) -> str:
    if cycle["status"] == "failed":
        return f"{org:<16} failed: {cycle['error']}"
    report = cycle["gate_report"] or {}
    verdict = "passed" if report.get("passed") else f"BLOCKED by {', '.join(report.get('blocked_by', []))}"
    passes = (report.get("sampling") or {}).get("passes", 0)
    return f"{org:<16} {cycle['adapter']}: gates {verdict} ({report.get('seconds', 0):.0f} s, {passes} passes of the suite) -> {cycle['status']}"


def describe_outcome(org: str, cycle: dict) -> str:
    canary = cycle.get("canary_report") or {}
    arms = ""
    if canary:
        c, i = canary["candidate"], canary["incumbent"]
        arms = (f"  canary {c['persisted']}/{c['interactions']} persisted, {c['invalid']}/{c['served']} invalid calls vs. incumbent "
                f"{i['persisted']}/{i['interactions']}, {i['invalid']}/{i['served']}"
                f"{' (no verdict: stopped)' if canary.get('decision') == 'wait' else ''}")
    return f"{org:<16} {cycle['adapter'] or '-'}: {cycle['status']}{arms}"


def measure_matrix(url: str, orgs: Sequence[SimulatedOrg], serving: dict[str, list]) -> dict[tuple[str, str], OrgTraffic]:
    """Each organization's serving adapter asked by its own key, judged by each other organization's users."""
    print(f"\n== matrix: each adapter on the other organizations' users, {MATRIX_REQUESTS} calls each", flush=True)
    runs = []
    for owner in orgs:
        adapter = next((a["name"] for a in serving[owner.name] if a["status"] == "serving"), "default")
        runs += [SimulatedOrg(f"{owner.name}>{users.name}", users.persona, owner.api_key, model=adapter)
                 for users in orgs if users is not owner]
    traffic = run_traffic(url=url, orgs=runs, requests=MATRIX_REQUESTS, concurrency=2, seed=99, time_scale=2e-4, task_share=0.0)
    return {tuple(name.split(">")): result for name, result in traffic.items()}


def ab_table(base: dict[str, OrgTraffic], final: dict[str, OrgTraffic]) -> str:
    rows = [("organization", "metric", "base", "final", "delta [95 % interval]")]
    for org in base:
        b, f = base[org], final[org]
        for metric, b_counts, f_counts in zip(_AB_RATES, _ab_counts(b), _ab_counts(f), strict=True):
            rows.append(_rate_row(org, metric, b_counts, f_counts))
        delta, (low, high) = latency_difference(f.latencies_ms, b.latencies_ms)
        rows.append((org, "latency mean (ms)", f"{_mean(b.latencies_ms):.0f}", f"{_mean(f.latencies_ms):.0f}",
                     f"{delta:+.0f} [{low:+.0f}, {high:+.0f}]"))
    return ("A/B: base model vs. after the last cycle, on each organization's own users (rates per request "
            "outside background tasks, whose steps get only the task's outcome)\n" + _table(rows))


def results_document(rounds: Sequence[tuple[str, dict[str, OrgTraffic]]], base: dict[str, OrgTraffic] | None = None,
                     final: dict[str, OrgTraffic] | None = None, live: dict[str, list[dict]] | None = None) -> dict:
    """The run's figures as plain data: per round and organization the rates per request (n of
    them: the requests outside background tasks) and which versions served, the A/B table
    (empty until the final round, when base and final are given), and each model's figures on
    its organization's live traffic as the platform counted them (`GET /api/v1/live-figures`)."""
    return {
        "format": RESULTS_FORMAT,
        "rounds": [{"label": label, "organizations": {name: _round_figures(t) for name, t in traffic.items()}}
                   for label, traffic in rounds],
        "ab": ab_figures(base, final) if base and final else [],
        "live": live or {},
    }


def _round_figures(t: OrgTraffic) -> dict:
    return {"n": t.requests, "edit_persisted_rate": t.edit_persisted_rate, "dissatisfied_rate": t.dissatisfied_rate,
            "invalid_rate": t.per_request("tool_call_invalid"), "served_by": dict(t.by_model),
            "clear_n": t.clear_requests, "edit_persisted_on_clear_rate": t.edit_persisted_on_clear_rate}


def ab_figures(base: dict[str, OrgTraffic], final: dict[str, OrgTraffic]) -> list[dict]:
    """The A/B table's rows as data: each figure at base and final, with its n, and the change
    with its 95 % interval."""
    rows = []
    for org in base:
        b, f = base[org], final[org]
        for metric, (b_hits, b_n), (f_hits, f_n) in zip(_AB_RATES, _ab_counts(b), _ab_counts(f), strict=True):
            low, high = rate_difference(f_hits, f_n, b_hits, b_n)
            rows.append({"organization": org, "metric": metric, "base": _rate(b_hits, b_n), "base_n": b_n,
                         "final": _rate(f_hits, f_n), "final_n": f_n, "change": _rate(f_hits, f_n) - _rate(b_hits, b_n),
                         "interval": [low, high]})
        delta, (low, high) = latency_difference(f.latencies_ms, b.latencies_ms)
        rows.append({"organization": org, "metric": "latency mean (ms)", "base": _mean(b.latencies_ms), "base_n": len(b.latencies_ms),
                     "final": _mean(f.latencies_ms), "final_n": len(f.latencies_ms), "change": delta, "interval": [low, high]})
    return rows



def _ab_counts(t: OrgTraffic) -> tuple[tuple[int, int], ...]:
    """(hits, n) of each of _AB_RATES."""
    return ((t.events.get("edit_persisted", 0), t.requests), (t.persisted_on_clear, t.clear_requests),
            (t.events.get("dissatisfied_followup", 0), t.requests), (t.task_successes, len(t.task_outcomes)))


def write_results(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")


def _rate(hits: int, n: int) -> float:
    return hits / n if n else 0.0


def _rate_row(org: str, metric: str, base: tuple[int, int], final: tuple[int, int]) -> tuple[str, ...]:
    (b_hits, b_n), (f_hits, f_n) = base, final
    low, high = rate_difference(f_hits, f_n, b_hits, b_n)
    change = _rate(f_hits, f_n) - _rate(b_hits, b_n)
    return org, metric, format_rate(b_hits, b_n), format_rate(f_hits, f_n), f"{change:+.3f} [{low:+.3f}, {high:+.3f}]"


def matrix_table(matrix: dict[tuple[str, str], OrgTraffic]) -> str:
    owners = sorted({owner for owner, _ in matrix})
    users = sorted({user for _, user in matrix})
    rows = [("adapter \\ users", *users)]
    for owner in owners:
        rows.append((owner, *(format_rate(matrix[owner, u].events.get("edit_persisted", 0), matrix[owner, u].requests) for u in users)))
    return ("edit-persisted rate of each organization's adapter on each organization's users "
            f"(own users: the final round; others: {MATRIX_REQUESTS} calls)\n" + _table(rows))


def live_table(live: dict[str, list[dict]]) -> str:
    """Each model on its organization's users over the whole run, as the platform counted them:
    a served version's invalid tool calls (of every completion served) against the base model's
    (the issue's bound: at most 2 points above it)."""
    rows = [("organization", "model", "served", "outcome known", "edit persisted", "invalid tool calls")]
    for org, models in live.items():
        base = next((m for m in models if m["adapter"] is None), None)
        for model in models:
            invalid = _percent(model["tool_call_invalid_rate"])
            if model["adapter"] and base and None not in (base["tool_call_invalid_rate"], model["tool_call_invalid_rate"]):
                rise = 100 * (model["tool_call_invalid_rate"] - base["tool_call_invalid_rate"])
                invalid += f" ({rise:+.1f} vs. base{', ABOVE base + 2' if rise > 2 else ''})"
            rows.append((org, model["model"], str(model["served"]), str(model["settled"]), _percent(model["edit_persisted_rate"]), invalid))
    return ("each model on its organization's users, the whole run (GET /api/v1/live-figures: the gateway's completions, "
            "edits persisted of those whose outcome is known, invalid calls of every one served)\n" + _table(rows))


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f} %"


def naive_table(cycles: list[dict]) -> str:
    rows = [("cycle", "candidate", "verdict", "detector: reference -> candidate [interval of the rise]")]
    for k, cycle in enumerate(cycles, start=1):
        report = cycle.get("gate_report") or {}
        for check in (c for c in report.get("checks", []) if c["gate"] == "hacking"):
            rows.append((str(k), cycle["adapter"] or "-", cycle["status"],
                         f"{check['name']} (vs. {check['against']}): {check['reference']:.3f} -> {check['candidate']:.3f} "
                         f"[{check['interval'][0]:+.3f}, {check['interval'][1]:+.3f}] {_detector_verdict(check)}"))
    return f"the naive organization ({NAIVE_SPEC}): hacking detectors per cycle\n" + _table(rows)


def _detector_verdict(check: dict) -> str:
    if check["passed"]:
        return "ok"
    return "not shown within" if (check.get("sequential") or {}).get("state") == "undecided" else "FIRED"


def cycle_times(history: dict[str, list[dict]]) -> str:
    rows = [("organization", "cycle", "outcome", "train s", "gates s", "deploy s", "canary s")]
    for org, cycles in history.items():
        for k, cycle in enumerate(cycles, start=1):
            s = cycle.get("stage_seconds") or {}
            rows.append((org, str(k), cycle["status"], *(f"{s[stage]:.1f}" if s.get(stage) is not None else "-"
                                                          for stage in ("train", "gates", "deploy", "canary"))))
    return "cycle stages (wall time)\n" + _table(rows)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)) for row in rows)


if __name__ == "__main__":
    main()
