"""The embedded default's base model: a tiny Llama-architecture coding agent for the demo domain,
built by the product itself (SPEC 6.4) so that nothing is downloaded at run time.

    python -m demo.base_model            # build (or find in the cache) and print its directory

The result is an ordinary Hugging Face model directory (config, safetensors weights, a
tokenizer with a chat template) that vLLM serves and peft adapts like any other.
"""
