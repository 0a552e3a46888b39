"""The demo loop's figures: rates with Wilson intervals, differences with Newcombe intervals,
the tables it prints and the results file it writes, and how it ends when killed."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from demo import loop
from demo.loop import RESULTS_FORMAT, ab_table, live_table, matrix_table, results_document, write_results
from demo.traffic import OrgTraffic, wilson_interval
from demo.traffic.stats import format_rate, latency_difference, rate_difference


@pytest.mark.parametrize(("successes", "trials", "low", "high"), [
    (0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (14, 400, 0.0210, 0.0578),
])
def test_wilson_intervals_match_the_textbook_values(successes, trials, low, high):
    assert wilson_interval(successes, trials) == pytest.approx((low, high), abs=5e-4)


def test_no_trials_says_nothing_about_the_rate():
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_differences_match_newcombes_example_and_latency_shifts_are_found():
    assert rate_difference(56, 70, 48, 80) == pytest.approx((0.0524, 0.3339), abs=5e-4)
    delta, (low, high) = latency_difference([110.0, 120.0] * 50, [100.0, 110.0] * 50)
    assert delta == 10.0 and 5 < low <= 10 <= high < 15


def traffic(persisted: int, served: int, latency: float = 100.0, task_outcomes: tuple[float, ...] = ()) -> OrgTraffic:
    """`served` requests, plus one call per task outcome made as a background task's step."""
    calls = served + len(task_outcomes)
    return OrgTraffic(org="acme", persona="typed_snake", served=calls, requests=served, by_model={"demo-base": calls},
                      events={"edit_persisted": persisted}, failures={}, latencies_ms=[latency] * calls,
                      tasks=len(task_outcomes), task_outcomes=list(task_outcomes))


def test_the_ab_table_shows_base_final_and_the_delta_with_its_interval():
    lines = ab_table({"acme": traffic(14, 400)}, {"acme": traffic(160, 400, latency=90.0)}).splitlines()
    persisted = next(line for line in lines if "edit persisted" in line)
    assert format_rate(14, 400) in persisted and format_rate(160, 400) in persisted and "+0.365" in persisted
    assert "-10" in next(line for line in lines if "latency" in line)


def test_background_task_steps_do_not_dilute_the_rates_and_task_success_has_its_own_row():
    base, final = traffic(14, 400, task_outcomes=(0.0,) * 40), traffic(160, 400, task_outcomes=(1.0,) * 10 + (0.0,) * 30)
    lines = ab_table({"acme": base}, {"acme": final}).splitlines()
    assert "+0.365" in next(line for line in lines if "edit persisted" in line)  # 160/400 - 14/400, not per 440 calls
    tasks = next(line for line in lines if "task success" in line)
    assert format_rate(0, 40) in tasks and format_rate(10, 40) in tasks and "+0.250" in tasks


def test_the_matrix_has_a_row_per_adapter_and_a_column_per_users():
    table = matrix_table({(a, u): traffic(40 if a == u else 5, 100) for a in ("x", "y") for u in ("x", "y")})
    header, row_x, row_y = table.splitlines()[1:]
    assert header.split()[-2:] == ["x", "y"]
    assert row_x.split()[1] == "0.400" and row_y.split()[-3] == "0.400"


def test_the_results_file_holds_every_round_of_every_organization_and_the_ab_rows(tmp_path):
    base = traffic(14, 400, task_outcomes=(0.0,) * 4)
    final = OrgTraffic(org="acme", persona="typed_snake", served=304, requests=300, by_model={"acme@v3": 280, "acme@v2": 24},
                       events={"edit_persisted": 150, "dissatisfied_followup": 30, "tool_call_invalid": 6}, failures={},
                       latencies_ms=[90.0] * 304, tasks=4, task_outcomes=[1.0, 1.0, 0.0, 1.0],
                       clear_requests=240, persisted_on_clear=150)
    rounds = [("base model", {"acme": base}), ("cycle 1 (canaries live)", {"acme": final}), ("final", {"acme": final})]
    path = tmp_path / "run" / "results.json"
    live = {"acme": [live_model(None, 400, 14, 2), live_model("acme@v3", 280, 140, 6)]}
    write_results(path, results_document(rounds, {"acme": base}, {"acme": final}, live))
    document = json.loads(path.read_text())

    assert document["format"] == RESULTS_FORMAT
    assert [r["label"] for r in document["rounds"]] == ["base model", "cycle 1 (canaries live)", "final"]
    assert document["rounds"][-1]["organizations"]["acme"] == {
        "n": 300, "edit_persisted_rate": 0.5, "dissatisfied_rate": 0.1, "invalid_rate": 0.02,
        "served_by": {"acme@v3": 280, "acme@v2": 24}, "clear_n": 240, "edit_persisted_on_clear_rate": 0.625,
    }
    rows = {row["metric"]: row for row in document["ab"] if row["organization"] == "acme"}
    persisted = rows["edit persisted"]
    assert (persisted["base"], persisted["base_n"], persisted["final"], persisted["final_n"]) == (0.035, 400, 0.5, 300)
    assert persisted["change"] == pytest.approx(0.465) and 0 < persisted["interval"][0] < 0.465 < persisted["interval"][1]
    assert (rows["edit persisted, clear prompts"]["final"], rows["edit persisted, clear prompts"]["final_n"]) == (0.625, 240)
    assert rows["background task success"]["final"] == 0.75 and rows["latency mean (ms)"]["change"] == pytest.approx(-10.0)
    assert document["live"] == live


def live_model(model: str | None, served: int, persisted: int, invalid: int) -> dict:
    """A model as GET /api/v1/live-figures lists it, every outcome known."""
    return {"model": model or "demo-base", "adapter": model, "served": served, "settled": served, "edit_persisted": persisted,
            "edit_persisted_rate": persisted / served, "tool_call_invalid": invalid, "tool_call_invalid_rate": invalid / served}


def test_the_live_table_marks_a_version_whose_invalid_calls_rose_past_the_base_models_by_two_points():
    live = {"acme": [live_model(None, 400, 16, 2), live_model("acme@v1", 300, 90, 6), live_model("acme@v2", 200, 120, 6)]}
    base, v1, v2 = live_table(live).splitlines()[2:]
    assert "0.5 %" in base and "vs. base" not in base
    assert v1.split()[1:5] == ["acme@v1", "300", "300", "30.0"] and "2.0 % (+1.5 vs. base)" in v1
    assert "3.0 % (+2.5 vs. base, ABOVE base + 2)" in v2


def test_a_run_stopped_before_its_final_round_still_leaves_the_rounds_it_ran(tmp_path):
    rounds = [("base model", {"acme": traffic(14, 400)}), ("cycle 1 (canaries live)", {"acme": traffic(40, 300)})]
    path = tmp_path / "results.json"
    write_results(path, results_document(rounds))
    document = json.loads(path.read_text())

    assert [r["label"] for r in document["rounds"]] == ["base model", "cycle 1 (canaries live)"]
    assert document["ab"] == []


def test_every_round_rewrites_the_results_file_with_the_rounds_so_far(tmp_path, monkeypatch):
    """What a run killed mid-cycle leaves: each round is on disk as soon as it ends."""
    served = iter([traffic(14, 400), traffic(40, 300)])
    monkeypatch.setattr(loop, "run_traffic", lambda **kwargs: {"acme": next(served)})
    path, rounds = tmp_path / "results.json", []
    for label in ("base model", "cycle 1 (canaries live)"):
        loop.traffic_round("http://platform", [SimpleNamespace(name="acme")], label, requests=1, seed=0, rounds=rounds, results=path)
        assert [r["label"] for r in json.loads(path.read_text())["rounds"]][-1] == label

    assert len(json.loads(path.read_text())["rounds"]) == 2


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_kill_or_an_interrupt_unwinds_the_demo_so_that_the_platform_it_started_stops(signum):
    """Run as a background job (SIGINT ignored, as a shell starts one) and killed: the `with`
    that owns the platform must still run its way out."""
    child = textwrap.dedent("""
        import contextlib, os, signal, sys, time
        from demo.loop import exit_on_signals
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        exit_on_signals()
        @contextlib.contextmanager
        def platform():
            try:
                yield
            finally:
                print("platform stopped", flush=True)
        with platform():
            print("ready", flush=True)
            time.sleep(30)
    """)
    process = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, env={**os.environ})
    assert process.stdout.readline().strip() == "ready"
    process.send_signal(signum)
    out, _ = process.communicate(timeout=20)
    assert "platform stopped" in out
    assert process.returncode == 128 + signum
