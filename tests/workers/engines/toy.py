"""The toy zoo's folders and the toy suite's prompts, tokenized, for engine tests."""

from __future__ import annotations

from typing import Any

from tests.support.processes import ROOT
from workers.suites import load_suite

ZOO = ROOT / "zoo" / "models" / "spechub-toy"
VERIFIER, DRAFT, HEAD = str(ZOO / "llama-verifier"), str(ZOO / "llama-draft-1l"), str(ZOO / "eagle3-head")


def tokenizer() -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(ZOO / "llama-verifier" / "tokenizer.json"))


def suite_prompts() -> list[list[int]]:
    encoder = tokenizer()
    return [encoder.encode(prompt).ids for _, prompt in load_suite("toy-v2").prompts()]


def draft_model(model: str, k: int = 4) -> dict[str, object]:
    return {"method": "draft_model", "model": model, "num_speculative_tokens": k}
