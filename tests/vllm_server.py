"""A real vLLM server for tests, on a model directory, stopped when the block ends."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from serving.vllm_process import VllmOptions, VllmProcess


@contextmanager
def running_vllm(model_dir: Path, *, max_model_len: int = 256) -> Iterator[str]:
    options = VllmOptions(model=Path(model_dir), max_model_len=max_model_len, max_loras=2, max_lora_rank=8)
    with VllmProcess(options, log_path=Path(model_dir).parent / "vllm.log") as server:
        yield server.base_url
