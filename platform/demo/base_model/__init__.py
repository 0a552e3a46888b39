"""The embedded default's base model: a tiny Llama-architecture coding agent for the demo domain,
built by the product itself (SPEC 6.4) so that nothing is downloaded at run time.

    python -m demo.base_model            # build (or find in the cache) and print its directory

The result is an ordinary Hugging Face model directory (config, safetensors weights, a
tokenizer with a chat template) that vLLM serves and peft adapts like any other.
"""

from pathlib import Path


def embedded_base_model(data_dir: Path) -> Path:
    """The embedded default's base model directory, built on first use (the platform's
    SERVING_BASE_MODEL_PROVIDER)."""
    from demo.base_model.bootstrap import ensure_base_model
    from demo.base_model.config import BaseModelConfig

    return ensure_base_model(BaseModelConfig(), data_dir)
