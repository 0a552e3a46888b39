"""The vLLM client's failures, without a server: what its callers catch must be a VllmError.
Its calls against a real server are in test_vllm_adapters.py."""

from pathlib import Path

import pytest

from serving import vllm_client
from serving.vllm_process import free_port

CALLS = {
    "load_adapter": lambda url: vllm_client.load_adapter(url, name="acme@v1", path=Path("adapter"), timeout=2),
    "unload_adapter": lambda url: vllm_client.unload_adapter(url, name="acme@v1", timeout=2),
    "served_models": lambda url: vllm_client.served_models(url, timeout=2),
    "chat_sample": lambda url: vllm_client.chat_sample(url, model="demo-base", messages=[], max_tokens=1, timeout=2),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_a_server_that_does_not_answer_is_a_vllm_error(call):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(vllm_client.VllmError, match="did not answer") as raised:
        call(url)
    assert raised.value.status is None
    assert not vllm_client.is_healthy(url)


def test_a_refusal_reads_vllms_own_message():
    body = b'{"error": {"message": "The lora adapter acme@v1 was not found.", "type": "NotFoundError", "code": 404}}'
    error = vllm_client.refusal(path="/v1/load_lora_adapter", status=404, content=body, what="acme@v1")
    assert (error.status, error.detail) == (404, "The lora adapter acme@v1 was not found.")
    assert str(error) == "/v1/load_lora_adapter 'acme@v1': HTTP 404 The lora adapter acme@v1 was not found."


def test_a_refusal_that_is_not_vllms_json_keeps_the_start_of_its_body():
    error = vllm_client.refusal(path="/v1/load_lora_adapter", status=404, content=b"<html>" + b"x" * 1000)
    assert error.detail == ("<html>" + "x" * 1000)[:500]
