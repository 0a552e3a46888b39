"""The organization's data: an overview, interactions (content as stored: redacted, decrypted
for the page), background tasks, the audit log, and the organization itself (deletion). The
export is the API's own endpoint, which takes the console's session."""

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone

from console.access import SESSION_ORG, Confirmation, Confirmed, Page
from console.charts import period_for, quality_series
from console.paging import page_of
from serving import selectors as serving_selectors
from tenants import organizations, privacy, recording, selectors
from tenants.errors import InvalidInput
from tenants.models import FeedbackEvent, Role
from tenants.storage import storage_usage
from training import selectors as training_selectors
from training.models import Cycle

BASE_MODEL = "base"  # the served-version filter's value for the base model


PLOTTED_DAYS = 14


class Overview(Page):
    def get(self, request):
        org = request.principal.org
        used, quota = storage_usage(org=org)
        route = serving_selectors.route_get(org=org)
        since = _plotted_since()
        period, periods = _periods(org, since)
        return render(request, "console/overview.html", {
            "route": route,
            "canary_cycle": training_selectors.cycles_list(org=org).filter(status=Cycle.Status.CANARY).first(),
            "cycles": training_selectors.cycles_list(org=org).order_by("-created_at")[:5],
            "alerts": serving_selectors.alerts_list(org=org).filter(acknowledged_at__isnull=True).order_by("-created_at")[:3],
            "period": period, "periods": periods,
            "rewards": training_selectors.rewards_per_run(org=org, since=since),
            "policy": privacy.policy_get(org=org),
            "members": selectors.members_list(org=org).count(),
            "keys": selectors.api_keys_in_use(org=org),
            "used": used, "quota": quota, "used_share": used / quota if quota else 1.0,
        })


def _plotted_since():
    return timezone.now() - timedelta(days=PLOTTED_DAYS)


def _periods(org, since) -> tuple[str, list]:
    period = period_for(selectors.first_interaction_at(org=org, since=since), timezone.now())
    return period, selectors.interactions_by_period(org=org, since=since, period=period)


class QualityChart(Page):
    """The overview's plots' data (console/charts.py), for its script to draw."""

    def get(self, request):
        org, since = request.principal.org, _plotted_since()
        takeovers = [(adapter.name, adapter.deployed_at) for adapter in serving_selectors.adapters_list(org=org)
                     if adapter.deployed_at is not None and adapter.deployed_at >= since]
        period, periods = _periods(org, since)
        rewards = training_selectors.rewards_per_run(org=org, since=since)
        return JsonResponse(quality_series(periods, takeovers, rewards, period=period))


class InteractionFilters(forms.Form):
    served_by = forms.CharField(required=False, max_length=100, label="Served by")
    feedback = forms.ChoiceField(required=False, choices=[("", "any feedback")] + FeedbackEvent.Type.choices, label="Feedback")
    task = forms.UUIDField(required=False, label="Task")


class Interactions(Page):
    def get(self, request):
        org = request.principal.org
        filters = InteractionFilters(request.GET)
        if not filters.is_valid():
            return render(request, "console/interactions.html", {"filters": filters, "rows": [], "versions": []}, status=400)
        chosen = filters.cleaned_data
        lookups = {}
        if chosen["served_by"]:
            lookups.update({"adapter__isnull": True} if chosen["served_by"] == BASE_MODEL else {"adapter": chosen["served_by"]})
        if chosen["task"]:
            lookups["task_id"] = chosen["task"]
        rows = selectors.interactions_list(org=org, filters=lookups, feedback_type=chosen["feedback"] or None)
        page = page_of(rows, by="created_at", cursor=request.GET.get("cursor"))
        _with_content(org, page.rows)
        feedback = selectors.feedback_types_of(org=org, ids=[row.pk for row in page.rows])
        for row in page.rows:
            row.feedback = feedback.get(row.pk, [])
        kept = {key: value for key, value in request.GET.items() if key != "cursor" and value}
        return render(request, "console/interactions.html", {
            "filters": filters, "rows": page.rows, "next_cursor": page.next_cursor, "kept": kept, "paged": "cursor" in request.GET,
            "versions": [BASE_MODEL] + [a.name for a in serving_selectors.adapters_list(org=org)],
        })


# What a page decrypts at most, as the API's pages: a hundred rows of the largest recordings would
# be gigabytes in one web server's memory. The rest is `withheld`, to be opened one by one.
CONTENT_BYTES_SHOWN = 8 * 1024 * 1024
STEPS_SHOWN = 200


def _with_content(org, rows) -> None:
    """Each row's decrypted content (None where there is none) as `shown`, read in one query,
    until CONTENT_BYTES_SHOWN."""
    budget, shown = CONTENT_BYTES_SHOWN, []
    for row in rows:
        budget -= row.content_size or 0
        row.withheld = bool(shown) and budget < 0
        if not row.withheld:
            shown.append(row)
    sealed = selectors.interaction_contents(org=org, ids=[row.pk for row in shown])
    for row in rows:
        row.content = sealed.get(row.pk)
        row.shown = recording.interaction_content(interaction=row) if row.content is not None else None


class InteractionDetail(Page):
    find = staticmethod(recording.interaction_get)

    def get(self, request, interaction_id):
        interaction = self.object
        return render(request, "console/interaction.html", {
            "interaction": interaction,
            "content": recording.interaction_content(interaction=interaction),
            "events": selectors.interaction_feedback(interaction=interaction),
        })


class InteractionErase(Confirmed):
    find = staticmethod(recording.interaction_get)

    def confirmation(self, request) -> Confirmation:
        return Confirmation(f"Erase interaction {self.object.pk}?", [
            "Its content and every feedback event about it are deleted; this cannot be undone.",
            "The erasure is recorded in the audit log."], "Erase interaction",
            reverse("console:interaction", kwargs={"interaction_id": self.object.pk}))

    def post(self, request, interaction_id):
        recording.interaction_erase(interaction=self.object, actor=request.principal.actor)
        messages.success(request, f"Interaction {interaction_id} was erased.")
        return redirect("console:interactions")


class Tasks(Page):
    def get(self, request):
        page = page_of(selectors.tasks_list(org=request.principal.org), by="created_at", cursor=request.GET.get("cursor"))
        return render(request, "console/tasks.html", {"rows": page.rows, "next_cursor": page.next_cursor, "paged": "cursor" in request.GET})


class TaskDetail(Page):
    find = staticmethod(recording.task_get)

    def get(self, request, task_id):
        everything = selectors.task_steps(task=self.object)
        steps = list(everything[:STEPS_SHOWN])
        _with_content(request.principal.org, steps)
        return render(request, "console/task.html", {"task": self.object, "steps": steps,
                                                     "step_count": everything.count() if len(steps) == STEPS_SHOWN else len(steps)})


class AuditLog(Page):
    def get(self, request):
        page = page_of(selectors.audit_events_list(org=request.principal.org), by="at", cursor=request.GET.get("cursor"),
                       tiebreak="public_id")  # its pk counts every organization's events
        return render(request, "console/audit_log.html", {"rows": page.rows, "next_cursor": page.next_cursor, "paged": "cursor" in request.GET})


class DeleteForm(forms.Form):
    confirm = forms.CharField(label="Type the organization's slug to confirm")


class OrganizationSettings(Page):
    roles = {"POST": Role.OWNER}

    def get(self, request, form=None):
        return render(request, "console/organization.html", {"form": form or DeleteForm()})

    def post(self, request):
        org, form = request.principal.org, DeleteForm(request.POST)
        if form.is_valid():
            try:
                organizations.org_delete(org=org, confirm_slug=form.cleaned_data["confirm"].strip())
            except InvalidInput:
                form.add_error("confirm", f"That is not {org.slug}.")
            else:
                request.session.pop(SESSION_ORG, None)
                messages.success(request, f"{org.name} and everything of it were deleted.")
                return redirect("console:home")
        return self.get(request, form)
