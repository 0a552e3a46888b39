"""A model's scored responses to the gates' global suite, in passes: each pass is every prompt
of the suite sampled once at temperature 1, a fresh draw; the gates take more passes of a
candidate when the first cannot decide (serving.gates).

Sampled through a vLLM replica directly (never through the gateway: nothing is recorded) and
stored per pass (`SuiteResult`): a version's weights never change, so the incumbent's passes are
those of its own gate run as a candidate, and the base model's those of earlier organizations'
gate runs; a gate run samples only the passes nobody has sampled yet.

The global suite is a dotted path (settings.GATES_GLOBAL_SUITE) to a function returning an object
with `items` (each with `messages` and `ambiguous`), `max_tokens`, and
`score(item, completion) -> {"kind": "edit" | "ask" | "invalid", "correct": bool | None}`.
"""

import hashlib
import json
from collections import Counter
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


def suite_verdicts(*, url: str, suite, models: Sequence[AdapterVersion | None], passes: int = 1) -> dict:
    """Each model's passes over the suite (None: the base model), by model, each pass its scored
    responses in the suite's order: every stored pass, and passes sampled now, at once, where
    fewer than `passes` are stored."""
    key = _suite_fingerprint(suite)
    names = {model: _result_name(model) for model in models}
    stored: dict[str, dict[int, list]] = {name: {} for name in names.values()}
    for name, sample_pass, verdicts in (SuiteResult.objects.filter(suite=key, model__in=names.values())
                                        .values_list("model", "sample_pass", "verdicts")):
        stored[name][sample_pass] = verdicts
    missing = [(model, sample_pass) for model in dict.fromkeys(models) for sample_pass in range(passes)
               if sample_pass not in stored[names[model]]]
    jobs = [(model, sample_pass, index) for model, sample_pass in missing for index in range(len(suite.items))]

    def sample(job):
        model, _, index = job
        return vllm_client.chat_sample(url, model=served_name(model), messages=suite.items[index].messages, max_tokens=suite.max_tokens)

    # The threads only wait on the replicas; scoring stays on this thread, since the suite's
    # scorer may parse code and CPython 3.11's ast.parse is not safe across threads
    # ("AST constructor recursion depth mismatch", seen in CI).
    sampled = {job: [None] * len(suite.items) for job in missing}
    with ThreadPoolExecutor(PARALLEL_REQUESTS) as pool:
        for (model, sample_pass, index), (text, tokens) in zip(jobs, pool.map(sample, jobs), strict=True):
            sampled[model, sample_pass][index] = {**suite.score(suite.items[index], text), "tokens": tokens}
    for (model, sample_pass), values in sampled.items():
        row, _ = SuiteResult.objects.get_or_create(suite=key, model=names[model], sample_pass=sample_pass,
                                                   defaults={"adapter": model, "verdicts": values})
        stored[names[model]][sample_pass] = row.verdicts  # another gate run's, if it stored this pass first
    return {model: [stored[names[model]][p] for p in sorted(stored[names[model]])] for model in models}


def passes_stored(*, suite, models: Sequence[AdapterVersion | None]) -> int:
    """How many passes every one of `models` has stored (a model's are numbered 0, 1, ... in order)."""
    names = {_result_name(model) for model in models}
    counts = Counter(SuiteResult.objects.filter(suite=_suite_fingerprint(suite), model__in=names).values_list("model", flat=True))
    return min(counts[name] for name in names)


def stored_passes(*, suite, model: AdapterVersion | None) -> list[list[dict]]:
    """The passes stored for one model, sampling nothing: a lineage's older versions, say."""
    rows = SuiteResult.objects.filter(suite=_suite_fingerprint(suite), model=_result_name(model)).order_by("sample_pass")
    return list(rows.values_list("verdicts", flat=True))


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
