"""The embedded default's global suite for the gates (settings.GATES_GLOBAL_SUITE): fixed
prompts over every task of the demo domain, clear and ambiguous, never drawn by the corpus or
the simulated users, and the scorer that tells what a response did.

The platform samples each prompt from the candidate and the incumbent and asks `score` about
each response: its kind (an edit, an ask, or an invalid tool call: the response classifier of
the hacking detectors) and, for an edit, whether it is correct (right file, right function,
right body, judged on the AST). A deployment with a real base model names its own suite with
the same shape.
"""

import random
from dataclasses import dataclass

from demo.domain import Ask, Edit, Prompt, check_edit, generate, parse_response, render_prompt

SUITE_SEED = 2_000_003  # neither the corpus's seed nor any traffic seed
SIZE = 160


@dataclass(frozen=True)
class SuiteItem:
    messages: list[dict]  # what is sent, as a user of the organization would
    ambiguous: bool  # asking is the right answer
    prompt: Prompt


class DemoGlobalSuite:
    max_tokens = 160  # longer than any valid response of the demo domain

    def __init__(self, size: int = SIZE):
        rng = random.Random(SUITE_SEED)
        prompts = [generate.sample_prompt(rng) for _ in range(size)]
        self.items = [SuiteItem([{"role": "user", "content": render_prompt(p)}], p.file is None, p) for p in prompts]

    def score(self, item: SuiteItem, completion: str) -> dict:
        """{"kind": "edit" | "ask" | "invalid", "correct": bool for an edit, else None}."""
        response = parse_response(completion)
        if isinstance(response, Edit):
            return {"kind": "edit", "correct": check_edit(response, item.prompt).correct}
        return {"kind": "ask" if isinstance(response, Ask) else "invalid", "correct": None}


def global_suite() -> DemoGlobalSuite:
    return DemoGlobalSuite()
