"""vLLM serves the base model and per-organization adapters side by side, loaded at run time."""

import json
import urllib.request
from pathlib import Path

import pytest

from demo.domain import FILES, TASKS, Prompt, render_prompt
from serving import vllm_api
from tests.serving.adapters import random_lora
from tests.serving.conftest import BASE_NAME

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def server(vllm):
    adapters = {name: random_lora(vllm.base_dir, vllm.workdir / name, seed=seed) for seed, name in enumerate(("acme@v1", "globex@v1"), 1)}
    yield vllm.process, BASE_NAME, adapters
    for name in adapters.keys() & vllm_api.served_models(vllm.url):
        vllm_api.unload_adapter(vllm.url, name=name)


def chat(base_url: str, model: str, **sampling) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": render_prompt(Prompt(TASKS[5], FILES[0]))}],
            "max_tokens": 12, **sampling}
    request = urllib.request.Request(base_url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def greedy(base_url: str, model: str) -> str:
    return chat(base_url, model, temperature=0)["choices"][0]["message"]["content"]


def test_the_self_built_base_model_samples_with_a_logprob_per_token(server):
    process, base, _ = server
    completion = chat(process.base_url, base, temperature=1.0, logprobs=True)
    choice = completion["choices"][0]
    assert choice["message"]["content"]
    assert len(choice["logprobs"]["content"]) == completion["usage"]["completion_tokens"]


def test_adapters_load_at_run_time_and_each_serves_its_own_weights(server):
    process, base, adapters = server
    for name, path in adapters.items():
        vllm_api.load_adapter(process.base_url, name=name, path=path)
    assert vllm_api.served_models(process.base_url) >= {base, "acme@v1", "globex@v1"}
    outputs = {model: greedy(process.base_url, model) for model in (base, "acme@v1", "globex@v1")}
    assert len(set(outputs.values())) == 3, outputs


def test_unloading_an_adapter_stops_serving_it(server):
    process, _, adapters = server
    vllm_api.load_adapter(process.base_url, name="gone@v1", path=adapters["acme@v1"])
    vllm_api.unload_adapter(process.base_url, name="gone@v1")
    assert "gone@v1" not in vllm_api.served_models(process.base_url)


def test_a_missing_adapter_directory_is_a_clear_error(server, tmp_path):
    process, _, _ = server
    with pytest.raises(vllm_api.VllmError, match="nowhere@v1"):
        vllm_api.load_adapter(process.base_url, name="nowhere@v1", path=Path(tmp_path / "missing"))
