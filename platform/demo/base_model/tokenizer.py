"""A byte-level BPE tokenizer trained on the corpus, with the chat template vLLM applies."""

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

BOS, END, PAD = "<|bos|>", "<|end|>", "<|pad|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|tool|>")

# The same text the trainer builds for each example: what the model learns is what it is served.
# A role the model has no token for speaks as the system; content that is not a string (None,
# or a list of parts from a client) is rendered as its text parts joined.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% set role = message['role'] if message['role'] in ['system', 'user', 'assistant', 'tool'] else 'system' %}"
    "{% set content = message['content'] if message['content'] is string else "
    "(message['content'] or []) | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') %}"
    "<|{{ role }}|>\n{{ content }}<|end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def train_tokenizer(texts: list[str], vocab_size: int, max_length: int) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, BOS, END, *ROLE_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=BOS, eos_token=END, pad_token=PAD,
        additional_special_tokens=list(ROLE_TOKENS),  # never split, skipped when decoding
        chat_template=CHAT_TEMPLATE, model_max_length=max_length,
    )
