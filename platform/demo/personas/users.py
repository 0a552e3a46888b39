"""The users of a simulated organization (SPEC 6.5, 6.6): how they react to what the agent
sent them, as feedback events the traffic driver reports to the platform.

Like real users, they see only the prompt they wrote and the response's text; they read both
with demo.domain. Randomness comes from the `random.Random` passed in, so a seed replays a run.
"""

import random
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from demo.domain import (
    DIMENSIONS, FILES, TASKS, Ask, Invalid, Prompt, Verdict, check_edit, parse_prompt, parse_response, render_prompt,
)

PERSONAS_FILE = Path(__file__).with_name("personas.toml")

# The platform's feedback event types (SPEC 5), and no others.
EVENT_TYPES = (
    "edit_accepted", "edit_rejected", "edit_persisted", "edit_reverted", "dissatisfied_followup",
    "clarification_answered", "tool_call_invalid", "interrupted", "task_outcome",
)

Range = tuple[float, float]  # seconds, low and high


@dataclass(frozen=True)
class Noise:
    interrupt: float  # the user stops the agent without judging the response
    revert_when_satisfied: float  # an edit meeting every preference is still rewritten
    persist_when_soft_miss: float  # an edit missing a soft preference is still kept
    followup_after_required_miss: float  # SPEC 6.5's "often"
    followup_after_clear_ask: float  # SPEC 6.5's "most of the time"

    def __post_init__(self) -> None:
        for field in fields(self):
            if not 0.0 <= getattr(self, field.name) <= 1.0:
                raise ValueError(f"noise {field.name} is a probability, not {getattr(self, field.name)}")


@dataclass(frozen=True)
class Delays:
    followup: Range  # dissatisfied_followup
    clarification: Range  # clarification_answered
    settle: Range  # edit_persisted or edit_reverted
    outcome: Range  # a background task's task_outcome

    def __post_init__(self) -> None:
        for field in fields(self):
            low, high = getattr(self, field.name)
            if not 0 <= low <= high:
                raise ValueError(f"delay {field.name} needs 0 <= low <= high, not {low, high}")


@dataclass(frozen=True)
class Persona:
    name: str
    description: str
    required: Mapping[str, str]  # dimension -> value; missing one gets a correct edit rejected
    soft: Mapping[str, str]  # dimension -> value; missing one gets an accepted edit reverted
    noise: Noise
    delays: Delays

    def __post_init__(self) -> None:
        for kind, preferences in (("required", self.required), ("soft", self.soft)):
            for dimension, value in preferences.items():
                if value not in DIMENSIONS.get(dimension, ()):
                    raise ValueError(f"{self.name}: {kind} {dimension} = {value!r} is no style value")
        if both := self.required.keys() & self.soft.keys():
            raise ValueError(f"{self.name}: {sorted(both)} both required and soft")

    @classmethod
    def load(cls, name: str) -> "Persona":
        personas = load_personas()
        if name not in personas:
            raise KeyError(f"no persona {name!r}; there are {', '.join(personas)}")
        return personas[name]


@dataclass(frozen=True)
class FeedbackEvent:
    type: str  # one of EVENT_TYPES
    delay_s: float  # after the response was served
    value: float | None = None  # task_outcome's score

    def __post_init__(self) -> None:
        if self.type not in EVENT_TYPES:
            raise ValueError(f"{self.type!r} is not a platform event type")


def load_personas(path: Path = PERSONAS_FILE) -> dict[str, Persona]:
    """The personas of a personas file, by name, in the file's order."""
    with path.open("rb") as file:
        data = tomllib.load(file)
    defaults = data.get("defaults", {})
    return {name: _persona(name, table, defaults) for name, table in data["personas"].items()}


def feedback_for(persona: Persona, prompt_text: str, response_text: str, rng: random.Random) -> list[FeedbackEvent]:
    """What the persona's user does about one served response (SPEC 6.5).

    ValueError if `prompt_text` is not a demo prompt: the simulated user wrote it.
    """
    if rng.random() < persona.noise.interrupt:
        return [_now("interrupted")]
    prompt = parse_prompt(prompt_text)
    response = parse_response(response_text)
    if isinstance(response, Invalid):
        return [_now("tool_call_invalid")]
    if isinstance(response, Ask):
        return _after_ask(persona, prompt, rng)
    return _after_edit(persona, check_edit(response, prompt), rng)


def sample_background_task(rng: random.Random) -> tuple[str, ...]:
    """The prompts of a background task (SPEC 6.6): 2-4 distinct functions for one file."""
    file = rng.choice(FILES)
    return tuple(render_prompt(Prompt(task, file)) for task in rng.sample(TASKS, rng.randint(2, 4)))


def task_outcome_for(persona: Persona, steps: Sequence[tuple[str, str]]) -> float:
    """1.0 when every step's response is a correct edit meeting the required preferences,
    else 0.0 (SPEC 6.6); `steps` are (prompt text, response text) pairs, one per function."""
    if not steps:
        raise ValueError("a background task has at least one step")
    return 1.0 if all(_done_right(persona, prompt, response) for prompt, response in steps) else 0.0


def task_outcome_event(persona: Persona, steps: Sequence[tuple[str, str]], rng: random.Random) -> FeedbackEvent:
    """The task's outcome as the event that arrives, late, for the whole task."""
    return _later("task_outcome", persona.delays.outcome, rng, value=task_outcome_for(persona, steps))


def _after_ask(persona: Persona, prompt: Prompt, rng: random.Random) -> list[FeedbackEvent]:
    if prompt.ambiguous:
        return [_later("clarification_answered", persona.delays.clarification, rng)]
    if rng.random() < persona.noise.followup_after_clear_ask:
        return [_later("dissatisfied_followup", persona.delays.followup, rng)]
    return []  # the user answers the needless question without complaint: nothing to report


def _after_edit(persona: Persona, verdict: Verdict, rng: random.Random) -> list[FeedbackEvent]:
    if not verdict.correct:
        return [_now("edit_rejected"), _later("dissatisfied_followup", persona.delays.followup, rng)]
    if not verdict.style.meets(persona.required):
        if rng.random() < persona.noise.followup_after_required_miss:
            return [_now("edit_rejected"), _later("dissatisfied_followup", persona.delays.followup, rng)]
        return [_now("edit_rejected")]
    if verdict.style.meets(persona.soft):
        persists = rng.random() >= persona.noise.revert_when_satisfied
    else:
        persists = rng.random() < persona.noise.persist_when_soft_miss
    settled = "edit_persisted" if persists else "edit_reverted"
    return [_now("edit_accepted"), _later(settled, persona.delays.settle, rng)]


def _done_right(persona: Persona, prompt_text: str, response_text: str) -> bool:
    response = parse_response(response_text)
    if isinstance(response, (Ask, Invalid)):
        return False
    verdict = check_edit(response, parse_prompt(prompt_text))
    return verdict.correct and verdict.style.meets(persona.required)


def _now(event_type: str) -> FeedbackEvent:
    return FeedbackEvent(event_type, 0.0)


def _later(event_type: str, delay: Range, rng: random.Random, value: float | None = None) -> FeedbackEvent:
    return FeedbackEvent(event_type, rng.uniform(*delay), value)


def _persona(name: str, table: dict[str, Any], defaults: dict[str, Any]) -> Persona:
    noise = {**defaults.get("noise", {}), **table.get("noise", {})}
    delays = {**defaults.get("delays", {}), **table.get("delays", {})}
    return Persona(
        name=name,
        description=table["description"],
        required=dict(table.get("required", {})),
        soft=dict(table.get("soft", {})),
        noise=Noise(**noise),
        delays=Delays(**{key: (float(low), float(high)) for key, (low, high) in delays.items()}),
    )
