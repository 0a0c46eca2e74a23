"""The toy tokenizer: byte-level BPE trained on the synthetic corpus."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

BOS, EOS, PAD = "<|bos|>", "<|eos|>", "<|pad|>"
USER, ASSISTANT = "<|user|>", "<|assistant|>"
SPECIAL_TOKENS = [PAD, BOS, EOS, USER, ASSISTANT]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
# The verifier's second revision (zoo/localhub.py, branch "thinking"): the same template with a thinking switch, as
# Qwen3's takes it. `enable_thinking` false closes an empty thought before the answer; unset or true leaves the
# model to think first. Qwen3's block ends in a blank line, which ends a document in the toy corpus: the toy verifier
# then answers nothing (measured: one token, EOS, on every suite prompt), so the toy's block ends in one newline.
CHAT_TEMPLATE_THINKING = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n' }}{% endif %}"
    "{% endif %}"
)


def train_tokenizer(texts: list[str], vocab_size: int) -> Tokenizer:
    """Return a byte-level BPE tokenizer with SpecHub's special tokens at ids 0-4."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def save_tokenizer(
    tokenizer: Tokenizer, directory: Path, chat_template: str = CHAT_TEMPLATE, chat_tokens: tuple[str, ...] = (USER, ASSISTANT)
) -> None:
    """Write tokenizer.json plus the transformers-side config files (the Llama toy's chat template and tokens by default;
    zoo/families.py passes each family's)."""
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "additional_special_tokens": list(chat_tokens),
        "model_max_length": 512,
        "chat_template": chat_template,
        "clean_up_tokenization_spaces": False,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    special = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "additional_special_tokens": list(chat_tokens)}
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def special_ids(tokenizer: Tokenizer) -> dict[str, int]:
    """Return the ids of bos, eos and pad."""
    ids = {name: tokenizer.token_to_id(token) for name, token in (("bos", BOS), ("eos", EOS), ("pad", PAD))}
    missing = [name for name, value in ids.items() if value is None]
    if missing:
        raise ValueError(f"the tokenizer lacks special tokens {missing}")
    return {name: int(value) for name, value in ids.items() if value is not None}
