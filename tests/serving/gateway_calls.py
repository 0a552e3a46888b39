"""Calls to the gateway as its users make them, through the official `openai` client, and the
interaction each one recorded."""

import openai

from demo.domain import FILES, TASKS, Prompt, render_prompt
from tenants.models import Interaction

PROMPT = render_prompt(Prompt(TASKS[5], FILES[0]))


def gateway_client(gateway: str, key: str, **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway}/v1", api_key=key, **options)


def ask(api: openai.OpenAI, model: str = "default", **options):
    options.setdefault("max_tokens", 24)
    return api.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}], **options)


def stored(org, interaction_id) -> Interaction:
    return Interaction.objects.for_org(org).get(pk=interaction_id)
