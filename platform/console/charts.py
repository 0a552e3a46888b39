"""The overview's plots as uPlot draws them: one x axis of hours, and per served version one
value per hour (null where it served nothing) of each plotted figure, with the moments a
version took over. Built from `tenants.selectors.interaction_hours`, which aggregates in the
database."""

from datetime import datetime

from tenants.selectors import PLOTTED_FEEDBACK, HourOfVersion

BASE_MODEL = "base model"
FIGURES = {  # key -> (title, unit)
    "edit_persisted": ("Edits persisted", "% of interactions"),
    "dissatisfied_followup": ("Dissatisfied follow-ups", "% of interactions"),
    "tool_call_invalid": ("Invalid tool calls", "% of interactions"),
    "latency_ms": ("Latency", "ms, mean"),
}


def quality_series(hours: list[HourOfVersion], takeovers: list[tuple[str, datetime]]) -> dict:
    xs = sorted({hour.hour for hour in hours})
    at = {x: i for i, x in enumerate(xs)}
    versions = sorted({hour.adapter or BASE_MODEL for hour in hours}, key=_version_order)
    series = {version: {key: [None] * len(xs) for key in ("interactions", *FIGURES)} for version in versions}
    for hour in hours:
        values, i = series[hour.adapter or BASE_MODEL], at[hour.hour]
        values["interactions"][i] = hour.interactions
        for kind in PLOTTED_FEEDBACK:
            values[kind][i] = round(100 * hour.with_feedback.get(kind, 0) / hour.interactions, 2)
        values["latency_ms"][i] = round(hour.latency_ms, 1) if hour.latency_ms is not None else None
    return {
        "hours": [int(x.timestamp()) for x in xs],
        "versions": versions,
        "figures": {key: {"title": title, "unit": unit} for key, (title, unit) in FIGURES.items()},
        "series": series,
        "takeovers": [{"version": name, "at": int(moment.timestamp())} for name, moment in takeovers],
    }


def _version_order(name: str) -> tuple[int, int]:
    """The base model first, then versions by number (acme@v10 after acme@v9)."""
    if name == BASE_MODEL:
        return (0, 0)
    number = name.rpartition("@v")[2]
    return (1, int(number) if number.isdigit() else 0)


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
        "figures": {key: {"title": title, "unit": unit} for key, (title, unit) in TRAINING_FIGURES.items()},
        "series": {key: per_step.get(key, []) for key in TRAINING_FIGURES},
    }
