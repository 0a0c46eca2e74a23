"""Workload suites: versioned prompt files per category, each identified by its content hash.

A suite is a JSON file:
    {"name": str, "version": int, "max_tokens": int,
     "categories": {"<category>": ["prompt", ...], ...}}
Categories are code, translation, summarization, chat, math, qa and rag; a
suite may cover a subset. The hash is over the canonical JSON, so any edit to
a prompt makes a new suite identity and a new baseline. A user-supplied suite
is the same format, loaded from its path.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel.errors import UserError

CATEGORIES = ("code", "translation", "summarization", "chat", "math", "qa", "rag")
SUITES = Path(__file__).parent
MAX_PROMPTS = 1000


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    max_tokens: int
    categories: dict[str, tuple[str, ...]]
    sha256: str

    @property
    def label(self) -> str:
        return f"{self.name}-v{self.version}"

    def prompts(self) -> list[tuple[str, str]]:
        """Return (category, prompt) pairs in a stable order."""
        return [(category, prompt) for category in CATEGORIES for prompt in self.categories.get(category, ())]


def load_suite(name_or_path: str) -> Suite:
    """Return the bundled suite `name` (e.g. 'toy-v1') or the suite file at a path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SUITES / f"{name_or_path}.json"
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError("run:invalid-spec", f"Workload suite {name_or_path!r} cannot be read: {exc}.") from exc
    return parse_suite(document)


def parse_suite(document: Any) -> Suite:
    """Validate a suite document; every refusal names the field at fault."""
    if not isinstance(document, dict):
        raise UserError("run:invalid-spec", "A workload suite must be a JSON object.")
    name, version, max_tokens = document.get("name"), document.get("version"), document.get("max_tokens")
    categories = document.get("categories")
    if not isinstance(name, str) or not name or not isinstance(version, int) or not isinstance(max_tokens, int):
        raise UserError("run:invalid-spec", "A workload suite needs a name (string), version and max_tokens (integers).")
    if not isinstance(categories, dict) or not categories or set(categories) - set(CATEGORIES):
        raise UserError("run:invalid-spec", f"Suite categories must be a non-empty subset of {list(CATEGORIES)}.")
    prompts = {c: v for c, v in categories.items() if isinstance(v, list) and all(isinstance(p, str) and p for p in v)}
    if prompts.keys() != categories.keys() or sum(len(v) for v in prompts.values()) > MAX_PROMPTS:
        raise UserError("run:invalid-spec", f"Each category holds a list of non-empty prompts, at most {MAX_PROMPTS} in all.")
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return Suite(
        name=name,
        version=version,
        max_tokens=max_tokens,
        categories={c: tuple(v) for c, v in prompts.items()},
        sha256=hashlib.sha256(canonical.encode()).hexdigest(),
    )


def tokenize(verifier: Path, prompts: list[str]) -> list[list[int]]:
    """Return the prompts' token ids under the verifier's own tokenizer."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(verifier / "tokenizer.json"))
    return [tokenizer.encode(prompt).ids for prompt in prompts]
