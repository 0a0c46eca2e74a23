"""The toy zoo's good pairs, each with the one verifier; the demo and the benchmarks use them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ZooPair:
    draft: str | None
    method: str
    options: dict[str, object] = field(default_factory=dict)


VERIFIER = "llama-verifier"
ZOO_PAIRS = [
    ZooPair("llama-draft-1l", "draft_model"),
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
