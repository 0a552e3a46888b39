"""The self-built base model: deterministic, cached, a valid HF directory (vLLM serving it is
tested with the adapters, in tests/serving/test_vllm_adapters.py, on one server start)."""

from dataclasses import replace

import pytest

from demo.base_model import bootstrap
from demo.base_model.config import TINY, BaseModelConfig

pytestmark = pytest.mark.one_database  # no database at all


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return bootstrap.ensure_base_model(TINY, tmp_path_factory.mktemp("data"), progress=False)


def test_the_same_config_builds_the_same_tokenizer_and_weights(tiny_model, tmp_path):
    again = bootstrap.ensure_base_model(TINY, tmp_path, progress=False)
    first, second = bootstrap.build_info(tiny_model)["report"], bootstrap.build_info(again)["report"]
    assert (first["tokenizer_sha256"], first["weights_sha256"]) == (second["tokenizer_sha256"], second["weights_sha256"])


def test_another_seed_builds_another_model(tiny_model, tmp_path):
    other = bootstrap.ensure_base_model(replace(TINY, seed=1), tmp_path, progress=False)
    assert bootstrap.build_info(other)["report"]["weights_sha256"] != bootstrap.build_info(tiny_model)["report"]["weights_sha256"]


def test_a_cached_model_is_not_rebuilt(tiny_model, monkeypatch):
    import demo.base_model.train as train

    monkeypatch.setattr(train, "build_base_model", lambda *a, **k: pytest.fail("rebuilt a cached model"))
    assert bootstrap.ensure_base_model(TINY, tiny_model.parents[1]) == tiny_model


def test_the_fingerprint_changes_with_any_setting():
    assert len({replace(BaseModelConfig(), **change).fingerprint() for change in ({}, {"seed": 1}, {"steps": 1}, {"vocab_size": 900})}) == 4


def test_the_tokenizer_keeps_code_whitespace_exactly(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    code = '<edit file="core.py">\ndef addNumbers(a, b):\n\t"""Return the sum."""\n  \treturn a + b\n</edit>'
    assert tokenizer.decode(tokenizer(code, add_special_tokens=False)["input_ids"]) == code


def test_the_chat_template_ends_where_the_response_begins(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "Task: x"}], add_generation_prompt=True, tokenize=False)
    assert rendered == "<|bos|><|user|>\nTask: x<|end|>\n<|assistant|>\n"


def test_the_chat_template_renders_client_shaped_messages(tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    messages = [{"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}, {"role": "assistant", "content": None}]
    assert tokenizer.apply_chat_template(messages, tokenize=False) == "<|bos|><|system|>\nBe brief.<|end|>\n<|assistant|>\n<|end|>\n"


def test_a_config_with_another_head_size_is_refused():
    with pytest.raises(ValueError, match="head size of 64"):
        BaseModelConfig(hidden=96, heads=3)
