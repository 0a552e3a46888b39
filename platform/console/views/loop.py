"""The loop: cycles (with their gate report and canary, live while they run), adapter versions
with their lineage (promote and roll back), and alerts (acknowledged by an admin)."""

from datetime import timedelta

from django.contrib import messages
from django.http import FileResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone

from console.access import Confirmation, Confirmed, Page
from console.charts import TRAINING_FIGURES, training_series
from console.paging import page_of
from serving import alerts, deployments, exports, live, registry
from serving import selectors as serving_selectors
from serving.models import AdapterVersion
from serving.verdicts import UNDECIDED
from tenants.errors import Conflict, Unavailable
from tenants.models import Role
from training import cycles, schedules
from training import selectors as training_selectors
from training.models import Cycle, TrainingRun


GATES = {  # a gate report's gates, as the cycle page heads their checks
    "tenant_suite": "This organization's held-out feedback",
    "global_suite": "The global suite: tool calls still valid and right",
    "hacking": "Reward-hacking detectors",
}


LIVE_DAYS = 7  # the adapters page's window of live traffic

# A canary claim, as its check's row names it; "inferior" is the one that rolls back.
CLAIMS = {"better": "better", "non_inferior": "within the margin", "inferior": "worse"}


def gate_verdict(check: dict) -> str:
    """A gate check's verdict as the cycle page says it: a guardrail that the gates could not
    show within its tolerance at their last look is blocked without being shown beyond it."""
    if check["passed"]:
        return "pass"
    return "not shown safe" if (check.get("sequential") or {}).get("state") == UNDECIDED else "fail"


def canary_shown(report: dict | None) -> dict | None:
    """A canary report as the cycle page shows it: one stored before the canary counted invalid
    tool calls has no served or invalid counts in its arms."""
    if not report:
        return report
    return {**report, **{arm: {"served": None, "invalid": None, **report[arm]} for arm in ("candidate", "incumbent")}}


def canary_row(check: dict) -> dict:
    """A canary check with what its sequential test has shown so far, and each claim's
    evidence (its log-likelihood ratio against the boundary): why a canary still waits."""
    tests = (check.get("sequential") or {}).get("tests")
    if not tests:  # a report of the fixed-sample canary, before the sequential test
        return {**check, "verdict": "within" if check["passed"] else "worse", "claims": []}
    reached = {test["claim"] for test in tests if test["reached"]}
    promoting = [test["claim"] for test in tests if test["claim"] != "inferior"]
    if "inferior" in reached:
        verdict = "shown worse"
    elif not promoting:  # a detector (invalid calls): a promotion waits only while its estimate is beyond the margin
        verdict = "beyond the margin, not shown yet" if any(test["on_its_side"] for test in tests) else "not shown worse"
    elif reached.issuperset(promoting):
        verdict = "shown " + " and ".join(CLAIMS.get(claim, claim) for claim in promoting)
    else:
        verdict = "undecided"
    # A ratio far from the null on the other side is large too, and says nothing for the claim.
    claims = [{"name": CLAIMS.get(test["claim"], test["claim"]), "boundary": test["boundary"], "reached": test["reached"],
               "statistic": test["log_likelihood_ratio"] if test.get("on_its_side", True) else None} for test in tests]
    return {**check, "verdict": verdict, "claims": claims}


class Cycles(Page):
    roles = {"POST": Role.ADMIN}

    def get(self, request):
        org = request.principal.org
        page = page_of(training_selectors.cycles_list(org=org), by="created_at", cursor=request.GET.get("cursor"))
        return render(request, "console/cycles.html", {
            "rows": page.rows, "next_cursor": page.next_cursor, "paged": "cursor" in request.GET,
            "next_run": schedules.schedule_next(org=org, now=timezone.now()),
        })

    def post(self, request):
        try:
            cycle = cycles.cycle_request(org=request.principal.org, trigger=TrainingRun.Trigger.REQUEST, actor=request.principal.actor)
        except Conflict as error:
            messages.error(request, error.message)
            return redirect("console:cycles")
        messages.success(request, "A cycle was queued: training starts when a worker takes it.")
        return redirect("console:cycle", cycle_id=cycle.pk)


class CycleDetail(Page):
    find = staticmethod(cycles.cycle_get)

    def get(self, request, cycle_id):
        cycle = self.object
        report = cycle.gate_report or {}
        return render(request, "console/cycle.html", {
            "cycle": cycle, "run": cycle.training_run, "live": cycle.status in Cycle.ACTIVE,
            "checks": [{**check, "gate_title": GATES.get(check["gate"], check["gate"]), "verdict": gate_verdict(check)}
                       for check in report.get("checks", [])],
            "blocked_by": report.get("blocked_by", []),
            "canary": canary_shown(cycle.canary_report), "training_figures": TRAINING_FIGURES,
            "canary_checks": [canary_row(check) for check in (cycle.canary_report or {}).get("checks", [])],
        })


class CycleTrainingChart(Page):
    """The cycle's training run, step by step (console/charts.py), for the cycle page's plots."""

    find = staticmethod(cycles.cycle_get)

    def get(self, request, cycle_id):
        run = self.object.training_run
        return JsonResponse(training_series(run.report if run else None))


class Adapters(Page):
    def get(self, request):
        org = request.principal.org
        training = training_selectors.adapters_training(org=org)
        adapters = [(adapter, training.get(adapter.pk)) for adapter in serving_selectors.adapters_list(org=org)]
        figures = live.live_figures(org=org, since=timezone.now() - timedelta(days=LIVE_DAYS))
        return render(request, "console/adapters.html", {"adapters": adapters, "route": serving_selectors.route_get(org=org),
                                                         "live": [_live_row(f) for f in figures], "live_days": LIVE_DAYS})


def _live_row(figures: live.LiveFigures) -> dict:
    """A model's live figures as the page shows them: each rate in % of the known outcomes."""
    def percent(rate: float | None) -> float | None:
        return None if rate is None else 100 * rate

    return {"figures": figures, "persisted": percent(figures.edit_persisted_rate), "dissatisfied": percent(figures.dissatisfied_rate),
            "invalid": percent(figures.tool_call_invalid_rate)}


class AdapterDownload(Page):
    """The version as a PEFT archive with its manifest, as the API's download gives it."""

    find = staticmethod(registry.adapter_get)
    roles = {"GET": Role.ADMIN}

    def get(self, request, name):
        try:
            archive = exports.adapter_archive(self.object)
        except Conflict as error:
            messages.error(request, error.message)
            return redirect("console:adapters")
        return FileResponse(archive, as_attachment=True, content_type="application/gzip",
                            filename=f"{exports.archive_name(self.object)}.tar.gz")


class AdapterPromote(Confirmed):
    find = staticmethod(registry.adapter_get)

    def confirmation(self, request) -> Confirmation:
        adapter = self.object
        return Confirmation(f"Serve {adapter.name} to everyone?", [
            f"Every end user of {request.principal.org.name} is served by {adapter.name} from now on; it is loaded on "
            "every replica first, then routed in one switch.",
            _serving_now(request.principal.org) + " It can be rolled back."],
            "Promote", reverse("console:adapters"))

    def post(self, request, name):
        return _deploy(request, lambda: deployments.adapter_deploy(adapter=self.object, actor=request.principal.actor),
                       f"{self.object.name} serves everyone now.")


class AdapterRollback(Confirmed):
    find = staticmethod(registry.adapter_get)

    def confirmation(self, request) -> Confirmation:
        adapter = self.object
        if adapter.status == AdapterVersion.Status.CANARY:
            after = [f"The canary of {adapter.name} ends and it is blocked; its users go back to the version serving everyone."]
        else:
            target = deployments.rollback_target(adapter)
            back_to = target.name if target else "the base model"
            after = [f"{adapter.name} stops serving; {back_to}, which it replaced, serves everyone again."]
        return Confirmation(f"Roll back {adapter.name}?", after, "Roll back", reverse("console:adapters"))

    def post(self, request, name):
        return _deploy(request, lambda: deployments.adapter_withdraw(adapter=self.object, actor=request.principal.actor),
                       f"{self.object.name} was rolled back.")


def _serving_now(org) -> str:
    route = serving_selectors.route_get(org=org)
    return f"Until now: {route.serving.name if route and route.serving else 'the base model'}."


def _deploy(request, change, done: str):
    try:
        change()
        messages.success(request, done)
    except (Conflict, Unavailable) as error:
        messages.error(request, error.message)
    return redirect("console:adapters")


class Alerts(Page):
    def get(self, request):
        org = request.principal.org
        training = training_selectors.adapters_training(org=org)
        rows = serving_selectors.alerts_list(org=org).order_by("acknowledged_at", "-created_at")[:200]
        return render(request, "console/alerts.html", {"alerts": [(alert, training.get(alert.adapter_id)) for alert in rows]})


class AlertAcknowledge(Page):
    find = staticmethod(alerts.alert_get)
    roles = {"POST": Role.ADMIN}

    def post(self, request, alert_id):
        alerts.alert_acknowledge(alert=self.object, actor=request.principal.actor)
        messages.success(request, f"The alert on {self.object.adapter.name} is acknowledged.")
        return redirect("console:alerts")
