"""The base model's training corpus: prompts and responses of the demo domain (SPEC 6.4)."""

import random
from dataclasses import dataclass

from demo.base_model.config import BaseModelConfig
from demo.domain import generate, render_prompt


@dataclass(frozen=True)
class Example:
    prompt: str  # the user message
    response: str  # the assistant message: exactly one tool call


def build_corpus(config: BaseModelConfig) -> list[Example]:
    rng = random.Random(config.seed)
    examples = []
    for _ in range(config.corpus_size):
        prompt = generate.sample_prompt(rng, ambiguous_rate=config.ambiguous_rate)
        examples.append(Example(render_prompt(prompt), generate.sample_response(rng, prompt)))
    return examples
