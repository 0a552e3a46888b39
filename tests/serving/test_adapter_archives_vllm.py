"""A downloaded adapter, outside the platform: peft, and vLLM loading the download's folder
under a name of its own (the platform's registry and routes play no part), give the greedy
answer the platform serves."""

import io
import tarfile

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from serving import registry, vllm_client
from serving.deployments import adapter_deploy
from tests.serving.test_vllm_adapters import PROMPT, TAUGHT, greedy

pytestmark = [pytest.mark.vllm, pytest.mark.one_database]

TOKENS = 12  # as test_vllm_adapters.greedy asks for


def peft_greedy(base_dir, adapter_dir) -> str:
    from peft import PeftModel

    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), adapter_dir)
    prompt = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**prompt, max_new_tokens=TOKENS, do_sample=False)
    return tokenizer.decode(out[0][prompt["input_ids"].shape[1]:], skip_special_tokens=True)


def test_a_download_answers_outside_the_platform_as_the_platform_serves_it(acme, serving_settings, vllm, tmp_path):
    taught = vllm.taught_adapter("acme@v1", messages=PROMPT, response=TAUGHT["acme@v1"])  # taught once a session
    adapter = registry.adapter_register(org=acme.org, source_dir=taught)
    adapter_deploy(adapter=adapter, actor="test")
    served = greedy(vllm.url, adapter.name)

    response = acme.client.get(f"/api/v1/adapters/{adapter.name}/download")
    with tarfile.open(fileobj=io.BytesIO(b"".join(response.streaming_content)), mode="r:gz") as tar:
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / "acme-v1"

    assert peft_greedy(vllm.base_dir, folder) == served
    vllm_client.unload_adapter(vllm.url, name=adapter.name)  # the session's vLLM: later tests load their own acme@v1
    vllm_client.load_adapter(vllm.url, name="downloaded", path=folder)
    try:
        assert greedy(vllm.url, "downloaded") == served
    finally:
        vllm_client.unload_adapter(vllm.url, name="downloaded")
