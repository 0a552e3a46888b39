"""The loop watched and steered in a real browser, on the real stack: vLLM with the tiny model,
the gateway (which also serves the console), a Celery worker. An admin starts a cycle and
watches its page go from training to its verdict without a reload; the overview and the
cycle plot what happened; the admin rolls the new version back and promotes it again through
the pages, checked with the openai client; an alert is acknowledged; a viewer sees all of it
and can change none of it; another organization's admin gets 404 for every one of its URLs.

Its screenshots (loop-*.png) are the README's: see docs/console.md to make them again.
"""

import re

import pytest
from django.db import connection
from playwright.sync_api import Browser, Page, expect

from serving.models import AdapterVersion, Alert
from serving.routing import ROUTE_CACHE_S
from tenants.models import Role
from tests.console.browser.test_console_in_a_browser import go, log_in
from tests.console.conftest import person
from tests.factories import make_tenant
from tests.real_loop import fit_policies_to_the_tiny_model, serve_and_rate, worker_env
from tests.serving.gateway_calls import ask, gateway_client
from tests.worker import running_worker
from training import cycles
from training.models import Cycle

pytestmark = [pytest.mark.vllm, pytest.mark.worker, pytest.mark.one_database]

# The statuses the cycle's page showed, in order, as it swapped them in (htmx).
WATCH_STATUS = """() => {
    window.statuses = [document.querySelector("#cycle-status").textContent.trim()];
    new MutationObserver(() => {
        const shown = document.querySelector("#cycle-status")?.textContent.trim();
        if (shown && shown !== window.statuses.at(-1)) window.statuses.push(shown);
    }).observe(document.body, {subtree: true, childList: true, characterData: true});
    window.notReloaded = true;
}"""
# What this test shows is the console, not the gates' power (tests/serving/test_gates.py): wide
# tolerances, so that the tiny model's noise on the suite never blocks its candidate.
LENIENT_GATES = {name: 0.3 for name in ("valid_tool_call_rate", "correct_body_rate", "right_call_rate", "invalid_tool_call_rate",
                                        "ask_rate_on_clear", "edit_rate")} | {"response_length": 1.0, "tenant_preference": 0.5}
PLOTTED = """(selector) => Object.fromEntries([...document.querySelectorAll(`${selector} figure[data-figure]`)]
    .map((figure) => [figure.dataset.figure, figure.uplot?.data]))"""


def the_cycle(org) -> Cycle:
    connection.close()  # a fresh snapshot: see the worker's commits (SQLite)
    return Cycle.objects.for_org(org).select_related("candidate").get()


def test_an_admin_watches_a_cycle_and_steers_what_serves(page: Page, browser: Browser, gateway, vllm, tiny_base_model,
                                                         serving_settings, cache_clock, tmp_path, screenshot):
    acme, globex = make_tenant("Acme", training_enabled=True), make_tenant("Globex")
    fit_policies_to_the_tiny_model(acme)
    assert acme.client.put("/api/v1/gate-thresholds", LENIENT_GATES, format="json").status_code == 200
    serve_and_rate(gateway, acme, calls=30)
    admin, viewer = person(acme, Role.ADMIN), person(acme, Role.VIEWER)
    outsider = person(globex, Role.ADMIN, email="admin@globex.example")
    api = gateway_client(gateway, acme.key)

    log_in(page, gateway, admin.email)
    go(page, "Cycles")
    with running_worker(env=worker_env(vllm, tiny_base_model, serving_settings, tmp_path)):
        page.get_by_role("button", name="Start a cycle now").click()
        expect(page.get_by_text("A cycle was queued")).to_be_visible()
        page.evaluate(WATCH_STATUS)
        expect(page.locator("#cycle-status")).to_have_text(re.compile("Canary|Blocked|Failed"), timeout=240_000)
        cycle = the_cycle(acme.org)
        assert cycle.status == Cycle.Status.CANARY, (cycle.error, [c for c in (cycle.gate_report or {}).get("checks", []) if not c["passed"]])
        expect(page.locator("#training-charts[data-drawn=true]")).to_have_count(1)
        steps = the_cycle(acme.org).training_run.report["steps"]
        trained = page.evaluate(PLOTTED, "#training-charts")
        assert set(trained) == {"loss", "kl", "clip_fraction"}
        assert all(xs == list(range(1, steps + 1)) and len(ys) == steps for xs, ys in trained.values())
        expect(page.locator("table.gate-report tbody tr:not(.group)")).to_have_count(8)
        screenshot("loop-cycle-canary")

        candidate = the_cycle(acme.org).candidate.name
        cache_clock.advance(ROUTE_CACHE_S)  # the gateway's route cache sees the canary
        serve_and_rate(gateway, acme, calls=60, users=30, good_model=candidate)  # its users are happier
        cycles.cycles_nudge()  # what the scheduler's tick does every minute
        expect(page.locator("#cycle-status")).to_have_text("Promoted", timeout=120_000)
    statuses = page.evaluate("window.statuses")
    assert statuses[-2:] == ["Canary", "Promoted"] and page.evaluate("window.notReloaded") is True, statuses
    expect(page.locator("#cycle-live[hx-trigger]")).to_have_count(0)  # it stopped asking
    expect(page.get_by_role("heading", name="Canary: promote")).to_be_visible()
    screenshot("loop-cycle")

    go(page, "Overview")
    expect(page.locator(".charts[data-drawn=true]")).to_have_count(1)
    plotted = page.evaluate(PLOTTED, ".charts")
    times, *lines = plotted["edit_persisted"]
    assert times and len(lines) == 2 and all(any(y is not None for y in line) for line in lines)  # base model, candidate
    expect(page.locator("figure[data-figure=edit_persisted] .u-legend")).to_contain_text(candidate)
    run = the_cycle(acme.org).training_run
    assert plotted["mean_reward"] == [[int(run.finished_at.timestamp())], [run.dataset["mean_reward"]]]
    screenshot("loop-overview")

    go(page, "Adapters")
    page.get_by_role("row", name=candidate).get_by_role("link", name="Roll back").click()
    expect(page.get_by_text("the base model, which it replaced, serves everyone again")).to_be_visible()
    page.get_by_role("button", name="Roll back").click()
    expect(page.get_by_text(f"{candidate} was rolled back.")).to_be_visible()
    assert ask(api, max_tokens=2).model != candidate
    page.get_by_role("row", name=candidate).get_by_role("link", name="Promote").click()
    page.get_by_role("button", name="Promote").click()
    expect(page.get_by_text(f"{candidate} serves everyone now.")).to_be_visible()
    assert ask(api, max_tokens=2).model == candidate
    screenshot("loop-adapters")

    adapter = AdapterVersion.objects.for_org(acme.org).get(name=candidate)
    check = next(c for c in the_cycle(acme.org).gate_report["checks"] if c["name"] == "invalid_tool_call_rate")
    alert = Alert.objects.create(org=acme.org, kind=Alert.Kind.REWARD_HACKING, adapter=adapter, figures=[check],
                                 message=f"{candidate} was blocked: the reward is being gamed.")
    page.goto(f"{gateway}/console/alerts/")
    expect(page.locator("nav .badge.count")).to_have_text("1")
    page.get_by_role("button", name="Acknowledge").click()
    expect(page.get_by_text(f"The alert on {candidate} is acknowledged.")).to_be_visible()
    expect(page.locator("nav .badge.count")).to_have_count(0)
    screenshot("loop-alerts")

    cycle = the_cycle(acme.org)
    own_urls = [f"/console/cycles/{cycle.pk}/", f"/console/cycles/{cycle.pk}/training.json",
                f"/console/adapters/{candidate}/rollback/", f"/console/adapters/{candidate}/promote/",
                f"/console/alerts/{alert.pk}/acknowledge/"]
    as_viewer = browser.new_context().new_page()
    log_in(as_viewer, gateway, viewer.email)
    for path in ("/console/", "/console/cycles/", f"/console/cycles/{cycle.pk}/", "/console/adapters/", "/console/alerts/"):
        as_viewer.goto(f"{gateway}{path}")
        expect(as_viewer.locator("h1")).to_be_visible()
        for control in ("Start a cycle now", "Promote", "Roll back", "Acknowledge"):
            expect(as_viewer.get_by_text(control, exact=True)).to_have_count(0)
    expect(as_viewer.locator("#training-charts[data-drawn=true]")).to_have_count(0)  # the alerts page: no plot
    as_viewer.goto(f"{gateway}/console/cycles/{cycle.pk}/")
    expect(as_viewer.locator("#training-charts[data-drawn=true]")).to_have_count(1)
    forged = as_viewer.evaluate("""async (path) => {
        const token = document.querySelector("input[name=csrfmiddlewaretoken]").value;
        return (await fetch(path, {method: "POST", body: new URLSearchParams({csrfmiddlewaretoken: token})})).status;
    }""", f"/console/adapters/{candidate}/rollback/")
    assert forged == 403 and ask(api, max_tokens=2).model == candidate

    as_outsider = browser.new_context().new_page()
    log_in(as_outsider, gateway, outsider.email)
    for path in own_urls:
        assert as_outsider.goto(f"{gateway}{path}").status == 404, path
    assert as_outsider.request.get(f"{gateway}/console/cycles/{cycle.pk}/training.json").status == 404
    screenshot("loop-not-found", of=as_outsider)
