"""Write the toy suite from the toy corpus's own domain: `python -m workers.suites.build`.

Each corpus document is cut where its answer starts, so the prompt asks what
the toy verifier was trained to answer. The seed differs from training's.

Version 2 adds long-context retrieval prompts: a question after many facts, one
of which answers it, so that acceptance is measured at every prompt length the
toy context holds (metrics.length_buckets: up to 64, 128, 256 and 480 tokens).
Version 1 stays as it was, for certificates that name it.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict

from workers.suites import CATEGORIES, SUITES, SuiteDocument
from zoo.corpus import documents

SEED, PER_CATEGORY, MAX_TOKENS, VERSION = 424242, 4, 32, 2
# Facts before each long-context question: about 100, 195, 240 and 420 of the toy verifier's tokens.
LONG_CONTEXT_FACTS = (6, 13, 16, 29)
# Where each category's answer begins; the prompt keeps the marker.
MARKERS = {
    "code": "(x):\n",
    "translation": "French:",
    "summarization": "Summary:",
    "chat": "<|assistant|>\n",
    "math": "A:",
    "qa": "A:",
    "rag": "Answer:",
}


def prompt_of(category: str, document: str) -> str:
    marker = MARKERS[category]
    return document[: document.rindex(marker) + len(marker)]


def long_context(facts: int, seed: int) -> str:
    """A retrieval prompt: `facts` facts in a seeded order, one of which answers the question after them."""
    rag = [d for d in documents(seed, 7 * facts) if d.startswith("Context: ")][:facts]
    contexts = [d.split("\n")[0].removeprefix("Context: ") for d in rag]
    random.Random(seed).shuffle(contexts)  # noqa: S311  # a seeded suite, not a secret
    question = rag[0].split("\n")[1]  # the question the first fact answers, wherever it now stands
    return f"Context: {' '.join(contexts)}\n{question}\nAnswer:"


def build() -> SuiteDocument:
    suite: dict[str, list[str]] = defaultdict(list)
    for index, document in enumerate(documents(SEED, PER_CATEGORY * len(CATEGORIES))):
        category = CATEGORIES[index % len(CATEGORIES)]
        suite[category].append(prompt_of(category, document))
    suite["rag"] += [long_context(facts, SEED + facts) for facts in LONG_CONTEXT_FACTS]
    return {"name": "toy", "version": VERSION, "max_tokens": MAX_TOKENS, "categories": dict(suite)}


if __name__ == "__main__":
    (SUITES / f"toy-v{VERSION}.json").write_text(json.dumps(build(), indent=2, ensure_ascii=False) + "\n")
