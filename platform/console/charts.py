"""The console's plots as uPlot draws them.

The overview's: one x axis of periods (hours, or minutes while the plotted traffic is young)
and per served version one value per period (null where it served nothing) of each plotted
figure, with the moments a version took over, from `tenants.selectors.interactions_by_period`
(which aggregates in the database); and per training run the mean reward of what it trained on.
A cycle's: its training run's figures per optimizer step.
"""

from datetime import datetime, timedelta

from serving.live import version_number
from tenants.selectors import PLOTTED_FEEDBACK, ServedPeriod
from training.selectors import RunReward

BASE_MODEL = "base model"
FIGURES = {  # key -> (title, unit)
    "edit_persisted": ("Edits persisted", "% of interactions"),
    "dissatisfied_followup": ("Dissatisfied follow-ups", "% of interactions"),
    "tool_call_invalid": ("Invalid tool calls", "% of interactions"),
    "latency_ms": ("Latency", "ms, mean"),
}
PERIOD_SECONDS = {"hour": 3600, "minute": 60}
# Traffic younger than this is plotted by the minute: hours would show a new organization (or
# a demo run) as one point per version.
MINUTES_FOR = timedelta(hours=6)


def period_for(first_at: datetime | None, now: datetime) -> str:
    return "minute" if first_at is not None and now - first_at < MINUTES_FOR else "hour"


def quality_series(periods: list[ServedPeriod], takeovers: list[tuple[str, datetime]], rewards: list[RunReward], *,
                   period: str) -> dict:
    xs = sorted({p.start for p in periods})
    at = {x: i for i, x in enumerate(xs)}
    versions = sorted({p.adapter or BASE_MODEL for p in periods}, key=_version_order)
    series = {version: {key: [None] * len(xs) for key in ("interactions", *FIGURES)} for version in versions}
    for p in periods:
        values, i = series[p.adapter or BASE_MODEL], at[p.start]
        values["interactions"][i] = p.interactions
        for kind in PLOTTED_FEEDBACK:
            values[kind][i] = round(100 * p.with_feedback.get(kind, 0) / p.interactions, 2)
        values["latency_ms"][i] = round(p.latency_ms, 1) if p.latency_ms is not None else None
    return {
        "period": period,
        "period_seconds": PERIOD_SECONDS[period],
        "times": [int(x.timestamp()) for x in xs],
        "versions": versions,
        "figures": _titled(FIGURES),
        "series": series,
        "takeovers": [{"version": name, "at": int(moment.timestamp())} for name, moment in takeovers],
        # One point per training run, when it finished: the mean reward of its window's traffic.
        "runs": {"times": [int(r.finished_at.timestamp()) for r in rewards], "mean_reward": [r.mean_reward for r in rewards],
                 "candidates": [r.candidate for r in rewards], "examples": [r.examples for r in rewards]},
    }


def _titled(figures: dict[str, tuple[str, str]]) -> dict:
    return {key: {"title": title, "unit": unit} for key, (title, unit) in figures.items()}


def _version_order(name: str) -> tuple[int, int]:
    """The base model first, then versions by number (acme@v10 after acme@v9)."""
    return (0, 0) if name == BASE_MODEL else (1, version_number(name))


TRAINING_FIGURES = {  # key of the trainer's per_step -> (title, unit)
    "loss": ("Loss", "policy loss"),
    "kl": ("KL to the base model", "nats per token"),
    "clip_fraction": ("Clipped", "share of tokens"),
}


def training_series(report: dict | None) -> dict:
    """The trainer's figures per optimizer step (training.engine.TrainReport.per_step); no
    steps before the run finished, or for runs trained before the trainer kept them."""
    per_step = (report or {}).get("per_step") or {}
    return {
        "steps": per_step.get("step", []),
        "figures": _titled(TRAINING_FIGURES),
        "series": {key: per_step.get(key, []) for key in TRAINING_FIGURES},
    }
