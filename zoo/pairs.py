"""The toy zoo's good pairs, each with its verifier; the demo and the benchmarks use them.

The order is the demo's: one pair of each family first (issue 60), so a newcomer sees every family certified early,
then Gemma 4's MTP assistant and the Llama toy's other pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VERIFIER = "llama-verifier"


@dataclass(frozen=True)
class ZooPair:
    draft: str | None
    method: str
    options: dict[str, object] = field(default_factory=dict)
    verifier: str = VERIFIER


# Each family's verifier and its EAGLE-3 head (zoo/families.py), by family.
FAMILY_VERIFIERS = {"llama": VERIFIER, "qwen3": "qwen3-verifier", "gpt-oss": "gpt-oss-verifier", "gemma4": "gemma4-verifier"}
FAMILY_HEADS = {"qwen3": "qwen3-eagle3-head", "gpt-oss": "gpt-oss-eagle3-head", "gemma4": "gemma4-eagle3-head"}
GEMMA4_ASSISTANT = "gemma4-assistant"
ZOO_PAIRS = [
    ZooPair("llama-draft-1l", "draft_model"),
    *(ZooPair(head, "eagle3", verifier=FAMILY_VERIFIERS[family]) for family, head in FAMILY_HEADS.items()),
    # Gemma 4's MTP assistant (zoo/assistant.py), served by vLLM as method mtp.
    ZooPair(GEMMA4_ASSISTANT, "mtp", verifier=FAMILY_VERIFIERS["gemma4"]),
    ZooPair("eagle3-head", "eagle3"),
    ZooPair("eagle3-head-reduced", "eagle3"),
    ZooPair(VERIFIER, "draft_model"),  # the self-draft, a sanity check
    ZooPair(None, "ngram", {"prompt_lookup_min": 2, "prompt_lookup_max": 4}),
]
BROKEN = [
    "broken-tokenizer-shuffled",
    "broken-vocab-mismatch",
    "broken-eagle3-hidden",
    "broken-eagle3-t2d",
    "broken-eagle3-local-path",
    "broken-eagle3-no-architectures",
    "broken-custom-code",
    "broken-pickle-only",
    "broken-config-not-json",
]
