"""One real vLLM server for the whole session (it takes a minute or two to start on 2 cores)
and the gateway served by uvicorn in a thread, like `manage.py up` serves it.

vLLM serves the tiny self-built base model under the platform's base-model name, with
runtime LoRA loading; adapters are real PEFT directories, with random weights or taught one
response (tests/serving/vllm_server.py).
"""

import threading
import time

import pytest
import uvicorn

from serving import vllm_api
from serving.gateway.database import close_connections
from serving.vllm_process import VllmOptions, VllmProcess, free_port
from tests.serving.vllm_server import BASE_NAME, Vllm


@pytest.fixture(scope="session")
def vllm(tmp_path_factory, tiny_base_model) -> Vllm:
    workdir, base = tmp_path_factory.mktemp("vllm"), tiny_base_model
    options = VllmOptions(model=base, served_name=BASE_NAME, max_loras=4, max_lora_rank=8)
    with VllmProcess(options, log_path=workdir / "vllm.log") as process:
        yield Vllm(process=process, base_dir=base, workdir=workdir)


@pytest.fixture
def serving_settings(settings, vllm, tmp_path):
    """The platform pointed at the session's vLLM and its base model, with adapters under this
    test's folder. Adapters leave vLLM after the test: the next test's database reuses their names."""
    settings.SERVING_VLLM_URLS = [vllm.url]
    settings.SERVING_BASE_MODEL_NAME = BASE_NAME
    settings.SERVING_BASE_MODEL_DIR = str(vllm.base_dir)
    settings.SERVING_ADAPTERS_ROOT = str(tmp_path / "adapters")
    yield settings
    for name in vllm_api.served_models(vllm.url) - {BASE_NAME}:
        vllm_api.unload_adapter(vllm.url, name=name)


@pytest.fixture(scope="session")
def gateway_server(django_db_setup) -> str:
    """The ASGI application under uvicorn in a thread, sharing this process's settings and
    test database (its requests come only from tests that hold `transactional_db`)."""
    from controlplane.asgi import application

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    close_connections()


@pytest.fixture
def gateway(gateway_server, serving_settings, transactional_db) -> str:
    return gateway_server
