"""A model's scored responses to the gates' global suite, sampled once per suite and model.

Sampled through a vLLM replica directly (never through the gateway: nothing is recorded) and
stored (`SuiteResult`): a version's weights never change, so the incumbent's responses are those
of its own gate run as a candidate, and the base model's those of the first organization's gate
run; a gate run samples only its candidate.

The global suite is a dotted path (settings.GATES_GLOBAL_SUITE) to a function returning an object
with `items` (each with `messages` and `ambiguous`), `max_tokens`, and
`score(item, completion) -> {"kind": "edit" | "ask" | "invalid", "correct": bool | None}`.
"""

import hashlib
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.utils.module_loading import import_string

from serving import vllm_client
from serving.models import AdapterVersion, SuiteResult
from serving.registry import base_model_dir

PARALLEL_REQUESTS = 8


def global_suite():
    return import_string(settings.GATES_GLOBAL_SUITE)()


def suite_verdicts(*, url: str, suite, models: Sequence[AdapterVersion | None]) -> dict:
    """Each model's scored responses to the suite (None: the base model), by model: stored ones
    where a gate run already sampled that model on this suite, the rest sampled now, at once."""
    key = _suite_fingerprint(suite)
    names = {model: _result_name(model) for model in models}
    stored = dict(SuiteResult.objects.filter(suite=key, model__in=names.values()).values_list("model", "verdicts"))
    missing = [model for model in dict.fromkeys(models) if names[model] not in stored]
    jobs = [(model, index) for index in range(len(suite.items)) for model in missing]

    def sample(job):
        model, index = job
        return vllm_client.chat_sample(url, model=served_name(model), messages=suite.items[index].messages, max_tokens=suite.max_tokens)

    # The threads only wait on the replicas; scoring stays on this thread, since the suite's
    # scorer may parse code and CPython 3.11's ast.parse is not safe across threads
    # ("AST constructor recursion depth mismatch", seen in CI).
    sampled = {model: [None] * len(suite.items) for model in missing}
    with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
        for (model, index), (text, tokens) in zip(jobs, pool.map(sample, jobs), strict=True):
            sampled[model][index] = {**suite.score(suite.items[index], text), "tokens": tokens}
    for model, values in sampled.items():
        SuiteResult.objects.get_or_create(suite=key, model=names[model], defaults={"adapter": model, "verdicts": values})
        stored[names[model]] = values
    return {model: stored[names[model]] for model in models}


def served_name(model: AdapterVersion | None) -> str:
    return model.name if model else settings.SERVING_BASE_MODEL_NAME


def _suite_fingerprint(suite) -> str:
    """What a stored result was sampled with: the suite's setting, prompts and token budget."""
    items = [[item.messages, item.ambiguous] for item in suite.items]
    content = json.dumps([settings.GATES_GLOBAL_SUITE, suite.max_tokens, items], sort_keys=True, default=str)
    return hashlib.sha256(content.encode()).hexdigest()


def _result_name(model: AdapterVersion | None) -> str:
    """An adapter's served name; the base model's name with its directory, which may change under it."""
    if model is not None:
        return model.name
    return f"{settings.SERVING_BASE_MODEL_NAME}@{hashlib.sha256(str(base_model_dir()).encode()).hexdigest()[:16]}"
