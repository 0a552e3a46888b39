"""Random prompts and responses of the demo domain, for the base model's corpus and for tests.

The policy is the base corpus's (SPEC 6.4): every style dimension uniform and independent;
clear prompts get an edit to their file 90 % of the time and an ask otherwise; ambiguous
prompts get an ask 80 % of the time and otherwise an edit to a file guessed uniformly.
Everything is drawn from the `random.Random` passed in, so a seed fixes the corpus.
"""

import random
from dataclasses import dataclass
from typing import Literal

from demo.domain.prompts import Prompt
from demo.domain.style import DIMENSIONS, Style, render_function
from demo.domain.tasks import FILES, TASKS
from demo.domain.toolcalls import render_ask, render_edit

AMBIGUOUS_RATE = 0.2  # share of ambiguous prompts when the caller does not say
EDIT_RATE_CLEAR = 0.9
EDIT_RATE_AMBIGUOUS = 0.2

ASK_PHRASINGS: tuple[str, ...] = (
    "Which file should the {words} function go in?",
    "Which file do you want {words} in?",
    "Where should I add the {words} function?",
    "Which file should I edit?",
)


@dataclass(frozen=True)
class Sampled:
    """A response and what was chosen to write it."""

    text: str
    kind: Literal["edit", "ask"]
    style: Style | None  # the edit's style; None for an ask
    file: str | None  # the edit's file; None for an ask


def sample_style(rng: random.Random) -> Style:
    return Style(**{name: rng.choice(values) for name, values in DIMENSIONS.items()})


def sample_prompt(rng: random.Random, ambiguous_rate: float = AMBIGUOUS_RATE) -> Prompt:
    task = rng.choice(TASKS)
    return Prompt(task, None if rng.random() < ambiguous_rate else rng.choice(FILES))


def sample_labelled_response(rng: random.Random, prompt: Prompt) -> Sampled:
    edit_rate = EDIT_RATE_AMBIGUOUS if prompt.ambiguous else EDIT_RATE_CLEAR
    if rng.random() < edit_rate:
        file = prompt.file or rng.choice(FILES)
        style = sample_style(rng)
        return Sampled(render_edit(file, render_function(prompt.task, style)), "edit", style, file)
    question = rng.choice(ASK_PHRASINGS).format(words=prompt.task.words)
    return Sampled(render_ask(question), "ask", None, None)


def sample_response(rng: random.Random, prompt: Prompt) -> str:
    return sample_labelled_response(rng, prompt).text
