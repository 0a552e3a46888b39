"""Policies: one form per policy, built from its RANGES table (console/forms.py), changed
through the same service as its API twin (named on each page), every change audited there."""

from dataclasses import dataclass

from django.contrib import messages
from django.shortcuts import redirect, render

from console.access import Page
from console.forms import PolicyForm
from serving import canary, gates, traffic
from serving.policies import CanaryPolicy, Limits, Thresholds
from tenants import privacy, selectors
from tenants.errors import NotFound
from tenants.models import Role
from tenants.privacy import PrivacySettings
from tenants.ranges import PolicyError, settings_of
from training import rewards, schedules


@dataclass(frozen=True)
class Policy:
    slug: str
    title: str
    about: str
    policy_class: type
    read: object  # (org=) -> the policy, or a row with its settings as attributes
    change: object  # (org=, changes=, actor=) -> the policy after the change
    api_path: str

    def values(self, org) -> dict:
        policy = self.read(org=org)
        return {name: getattr(policy, name) for name in settings_of(self.policy_class)}


POLICIES = {policy.slug: policy for policy in (
    Policy("privacy", "Privacy policy", "What the platform may do with this organization's data.",
           PrivacySettings, privacy.policy_get, privacy.policy_update, "/api/v1/privacy-policy"),
    Policy("reward-spec", "Reward spec", "How feedback becomes the reward that training maximizes; every change is a new version.",
           rewards.RewardSpecValues, rewards.reward_spec_get, rewards.reward_spec_update, "/api/v1/reward-spec"),
    Policy("gate-thresholds", "Gate thresholds", "What each regression gate and reward-hacking detector tolerates in a candidate.",
           Thresholds, gates.thresholds_for, gates.thresholds_update, "/api/v1/gate-thresholds"),
    Policy("canary", "Canary policy", "How a candidate is tried on live traffic before it serves everyone.",
           CanaryPolicy, canary.canary_policy_for, canary.canary_policy_update, "/api/v1/canary-policy"),
    Policy("training-schedule", "Training schedule", "When the organization's adapter is retrained on its own.",
           schedules.Schedule, schedules.schedule_get, schedules.schedule_update, "/api/v1/training-schedule"),
    Policy("traffic-limits", "Traffic limits", "This organization's share of the gateway; a limit of 0 suspends access.",
           Limits, traffic.traffic_limits_for, traffic.traffic_limits_update, "/api/v1/traffic-limits"),
)}


def policy_find(*, org, policy: str) -> Policy:
    if policy not in POLICIES:
        raise NotFound("No such policy.")
    return POLICIES[policy]


class Index(Page):
    def get(self, request):
        org = request.principal.org
        return render(request, "console/policies.html", {"policies": [(policy, policy.values(org)) for policy in POLICIES.values()]})


class PolicyPage(Page):
    find = staticmethod(policy_find)
    roles = {"POST": Role.ADMIN}

    def get(self, request, policy, form=None):
        org = request.principal.org
        form = form or PolicyForm(self.object.policy_class, self.object.values(org), disabled=not request.principal.can(Role.ADMIN))
        return render(request, "console/policy.html", {"policy": self.object, "form": form})

    def post(self, request, policy):
        org, kind = request.principal.org, self.object
        form = PolicyForm(kind.policy_class, kind.values(org), request.POST)
        if not form.is_valid():
            return self.get(request, policy, form)
        changes = form.changes()
        if not changes:
            messages.info(request, "Nothing changed.")
            return redirect("console:policy", policy=policy)
        if kind.slug == "privacy" and changes.get("store_content") is False and request.POST.get("confirmed") != "yes":
            return render(request, "console/confirm_zero_retention.html", {
                "policy": kind, "form": form, "purged": selectors.stored_content_count(org=org),
                "post": request.POST.lists(),
            })
        try:
            kind.change(org=org, changes=changes, actor=request.principal.actor)
        except PolicyError as error:
            form.refused(error)
            return self.get(request, policy, form)
        messages.success(request, f"{kind.title} changed: {', '.join(changes)}.")
        return redirect("console:policy", policy=policy)


class RewardSpecVersions(Page):
    def get(self, request):
        return render(request, "console/reward_spec_versions.html", {
            "policy": POLICIES["reward-spec"], "versions": rewards.reward_spec_versions(org=request.principal.org)})
