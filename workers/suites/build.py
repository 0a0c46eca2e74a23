"""Write the toy suite from the toy corpus's own domain: `python -m workers.suites.build`.

Each corpus document is cut where its answer starts, so the prompt asks what
the toy verifier was trained to answer. The seed differs from training's.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from workers.suites import CATEGORIES, SUITES
from zoo.corpus import documents

SEED, PER_CATEGORY, MAX_TOKENS = 424242, 4, 32
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


def build() -> dict[str, Any]:
    suite: dict[str, list[str]] = defaultdict(list)
    for index, document in enumerate(documents(SEED, PER_CATEGORY * len(CATEGORIES))):
        category = CATEGORIES[index % len(CATEGORIES)]
        suite[category].append(prompt_of(category, document))
    return {"name": "toy", "version": 1, "max_tokens": MAX_TOKENS, "categories": dict(suite)}


if __name__ == "__main__":
    (SUITES / "toy-v1.json").write_text(json.dumps(build(), indent=2, ensure_ascii=False) + "\n")
