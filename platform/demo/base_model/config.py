"""Everything that determines a base model, in one dataclass: same config, same model."""

import hashlib
import json
from dataclasses import asdict, dataclass, replace

# Bump when the corpus, tokenizer or training code changes what a config builds.
RECIPE_VERSION = 2


@dataclass(frozen=True)
class BaseModelConfig:
    seed: int = 0
    # Corpus (SPEC 6.4): generated prompt/response pairs.
    corpus_size: int = 20_000
    ambiguous_rate: float = 0.2  # share of prompts with `File: ?`
    # Tokenizer: byte-level BPE, so tabs and runs of spaces survive exactly.
    vocab_size: int = 800
    # Model: a Llama (or a Qwen2: biased q/k/v projections) with tied embeddings; head_dim 64
    # is what vLLM's CPU kernels expect.
    architecture: str = "llama"
    layers: int = 4
    hidden: int = 192
    heads: int = 3
    intermediate: int = 512
    max_positions: int = 256
    # Training: loss on the response only.
    steps: int = 600
    batch_size: int = 64
    learning_rate: float = 2e-3
    warmup_steps: int = 30
    weight_decay: float = 0.01

    def __post_init__(self):
        if self.hidden % self.heads or self.hidden // self.heads != 64:
            raise ValueError(f"hidden ({self.hidden}) / heads ({self.heads}) must be a head size of 64.")
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, not {self.architecture!r}.")

    def fingerprint(self) -> str:
        fields = asdict(self)
        if fields["architecture"] == "llama":  # the default before the field existed: its builds keep their cache
            del fields["architecture"]
        recipe = json.dumps({"recipe": RECIPE_VERSION, **fields}, sort_keys=True)
        return hashlib.sha256(recipe.encode()).hexdigest()[:16]


ARCHITECTURES = ("llama", "qwen2")


# A seconds-fast model for tests: the same recipe at a size that loads, not one that is good.
# Its 200 steps at a high rate (about 5 s) make it a model a LoRA can teach a response to, as
# the gate tests' planted adapters need: at 4 steps the embeddings keep their initial scale, the
# logits stay within about +-1.3 and no adapter can make a response likely.
TINY = BaseModelConfig(corpus_size=400, vocab_size=400, layers=1, hidden=64, heads=1, intermediate=128, steps=200, batch_size=16,
                       learning_rate=2e-2, warmup_steps=1)

# The second architecture (docs/operating.md, "Another base model"): a Qwen2 of a few million
# parameters, about a minute of training on 2 cores; TINY_QWEN2 is its seconds-fast test size.
QWEN2 = BaseModelConfig(architecture="qwen2", corpus_size=4000, vocab_size=600, layers=3, hidden=256, heads=4, intermediate=704,
                        steps=120, batch_size=32, learning_rate=3e-3, warmup_steps=10)
TINY_QWEN2 = replace(TINY, architecture="qwen2")
