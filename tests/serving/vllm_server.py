"""The session's vLLM server as tests see it (what the `vllm` fixture yields): the tiny
self-built base model served under BASE_NAME, with runtime LoRA loading, and real PEFT adapters
for it, with random weights or taught one response."""

from dataclasses import dataclass
from pathlib import Path

from serving import registry, vllm_client
from serving.models import AdapterVersion
from serving.vllm_process import VllmProcess

BASE_NAME = "demo-base"  # the platform's base-model name, which vLLM serves the tiny model under


@dataclass
class Vllm:
    process: VllmProcess
    base_dir: Path
    workdir: Path

    @property
    def url(self) -> str:
        return self.process.base_url

    def unload_adapters(self) -> None:
        """Back to the base model alone: the session's server is shared by every module."""
        for name in vllm_client.served_models(self.url) - {BASE_NAME}:
            vllm_client.unload_adapter(self.url, name=name)

    def trained_adapter(self, seed: int) -> Path:
        """A PEFT adapter directory for the served base, different for each seed."""
        folder = self.workdir / f"trained-{seed}"
        if not folder.exists():
            from tests.serving.adapters import random_lora  # imports torch: not at every session's start

            random_lora(self.base_dir, folder, seed=seed, base_name=BASE_NAME)
        return folder

    def taught_adapter(self, name: str, *, messages: list[dict], response: str) -> Path:
        """A PEFT adapter for the served base that answers `messages` with `response`."""
        folder = self.workdir / f"taught-{name}"
        if not folder.exists():
            from tests.serving.adapters import taught_lora

            taught_lora(self.base_dir, folder, messages=messages, response=response, base_name=BASE_NAME)
        return folder


def deployed_adapter(vllm: Vllm, org, *, seed: int) -> AdapterVersion:
    """Register a trained adapter for `org` and make it the organization's incumbent."""
    from serving.deployments import adapter_deploy

    adapter = registry.adapter_register(org=org, source_dir=vllm.trained_adapter(seed))
    adapter_deploy(adapter=adapter, actor="test")
    adapter.refresh_from_db()
    return adapter
