"""The bundled suites: versioned prompt files per category, each identified by its content hash.

A suite is a JSON file:
    {"name": str, "version": int, "max_tokens": int,
     "categories": {"<category>": ["prompt", ...], ...}}
Categories are code, translation, summarization, chat, math, qa, rag and
custom, and SPEED-Bench's as they are (kernel.traffic.KINDS); a suite may cover a
subset. The hash is over the canonical JSON, so any edit to a prompt makes a new
suite identity and a new baseline. A bundled suite may instead be `<name>.jsonl` of
SPEED-Bench's records: its identity is the workload's hash, and only each record's
first user turn is sent, rendered with the verifier's chat template.

A run may measure users' traffic instead, in two ways. `sha256:<hex>` names a
registry workload: the certify task hands this run its stored sample
(kernel.traffic.handoff), already rendered with the verifier's chat template,
and it is measured as it is, with no reading, sampling or hashing again. A path
names a file in any format kernel.traffic reads (the worker CLI): its chat
requests are rendered once the verifier's snapshot is fetched (`Suite.rendered`).
Either is private: its baseline outputs are never cached, and it is identified
by the workload's hash.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

from kernel.errors import UserError
from kernel.traffic import (
    CATEGORIES,
    CHUNK,
    KINDS,
    REFERENCE,
    ChatTemplate,
    Encode,
    Limits,
    Request,
    Workload,
    read_sample,
    read_workload,
    rendered,
    workload_path,
)

__all__ = ["CATEGORIES", "KINDS", "Suite", "chat_template", "load_suite", "parse_suite", "tokenize"]

SUITES = Path(__file__).parent
MAX_PROMPTS = 1000


class SuiteDocument(TypedDict):
    """A suite file as parse_suite reads it and workers/suites/build.py writes it."""

    name: str
    version: int
    max_tokens: int
    categories: dict[str, list[str]]  # by category: its prompts


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    max_tokens: int
    categories: dict[str, tuple[str, ...]]
    sha256: str
    private: bool = False
    pending: Workload | None = None  # a user's requests, prompts once rendered with the verifier's template
    requests: tuple[Request, ...] = ()  # a workload's requests as asked (messages, switches), once rendered

    def asked(self) -> list[Request]:
        """The requests as they were asked, in `prompts()`'s order: a workload's own, a bundled suite's as plain
        prompts (the thinking switch's passes render them, workers/modes.py)."""
        if self.requests:
            return [request for kind in KINDS for request in self.requests if request.category == kind]
        return [Request(0, category, prompt=prompt, max_tokens=self.max_tokens) for category, prompt in self.prompts()]

    @property
    def label(self) -> str:
        return f"{self.name}-v{self.version}"

    def prompts(self) -> list[tuple[str, str]]:
        """Return (category, prompt) pairs in a stable order."""
        return [(category, prompt) for category in KINDS for prompt in self.categories.get(category, ())]

    def rendered(self, verifier: Path, max_model_len: int) -> Suite:
        """Return the suite with a user's requests rendered by the verifier's chat template and length-checked."""
        if self.pending is None:
            return self
        done = rendered(self.pending, chat_template(verifier), _token_count(verifier), max_model_len)
        return replace(self, categories=_by_category(done.sample), pending=None, requests=done.sample)


def load_suite(name_or_path: str, run_id: int = 0) -> Suite:
    """Return the bundled suite `name` (e.g. 'toy-v2'), run `run_id`'s registry workload `sha256:<hex>`, or a file."""
    reference = REFERENCE.fullmatch(name_or_path)
    path = workload_path(reference[1], run_id) if reference else Path(name_or_path)
    if reference:
        return _from_sample(path)
    if not path.suffix:
        return _bundled(name_or_path)
    suite = _read_workload(path, name_or_path)
    if suite.pending is not None and suite.pending.format == "suite":  # SpecHub's own format keeps its identity and baselines
        return _read_suite(path, name_or_path)
    return suite


def _bundled(name: str) -> Suite:
    """A bundled suite: SpecHub's own JSON, or records as JSONL in a format kernel.traffic reads (SPEED-Bench's);
    either is public, so its baselines may be cached."""
    records = SUITES / f"{name}.jsonl"
    if records.exists() and not (SUITES / f"{name}.json").exists():
        return replace(_read_workload(records, name), private=False)
    return _read_suite(SUITES / f"{name}.json", name)


def _from_sample(path: Path) -> Suite:
    """A registry workload's stored sample, rendered and measured when it was stored: the prompts as they are."""
    sample = read_sample(path)
    max_tokens = max((r.max_tokens for r in sample.requests), default=0)
    return Suite("workload", 1, max_tokens, _by_category(sample.requests), sample.sha256, private=True,
                 requests=tuple(sample.requests))  # fmt: skip


def _read_workload(path: Path, name: str) -> Suite:
    try:
        with path.open("rb") as stream:
            workload = read_workload(iter(lambda: stream.read(CHUNK), b""), limits=Limits(sample_size=MAX_PROMPTS))
    except OSError as exc:
        raise UserError("run:invalid-spec", f"Workload file {name!r} cannot be read: {exc}.") from exc
    return _from_workload(workload, path.stem)


def _read_suite(path: Path, name: str) -> Suite:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError("run:invalid-spec", f"Workload suite {name!r} cannot be read: {exc}.") from exc
    return parse_suite(document)


def _from_workload(workload: Workload, name: str) -> Suite:
    """A user's upload as a private suite; its prompts wait for the verifier's template."""
    return Suite(
        name=re.sub(r"[^A-Za-z0-9_.-]", "-", name)[:60] or "workload",
        version=1,
        max_tokens=workload.max_tokens,
        categories={},
        sha256=workload.sha256,
        private=True,
        pending=workload,
    )


def _by_category(requests: tuple[Request, ...]) -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    for request in requests:
        found.setdefault(request.category, []).append(request.text or "")
    return {kind: tuple(found[kind]) for kind in KINDS if kind in found}


def parse_suite(document: object) -> Suite:
    """Validate a suite document; every refusal names the field at fault."""
    if not isinstance(document, dict):
        raise UserError("run:invalid-spec", "A workload suite must be a JSON object.")
    name, version, max_tokens = document.get("name"), document.get("version"), document.get("max_tokens")
    categories = document.get("categories")
    if not isinstance(name, str) or not name or not isinstance(version, int) or not isinstance(max_tokens, int):
        raise UserError("run:invalid-spec", "A workload suite needs a name (string), version and max_tokens (integers).")
    if not isinstance(categories, dict) or not categories or set(categories) - set(KINDS):
        raise UserError("run:invalid-spec", f"Suite categories must be a non-empty subset of {list(KINDS)}.")
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


def chat_template(verifier: Path) -> ChatTemplate | None:
    """The chat template in the verifier snapshot's tokenizer_config.json, if it has one."""
    path = verifier / "tokenizer_config.json"
    try:
        config = json.loads(path.read_text()) if path.exists() else None
    except ValueError:  # the gate has named it; a template that cannot be read is no template
        config = None
    return ChatTemplate.from_tokenizer_config(config if isinstance(config, dict) else None)


def tokenize(verifier: Path, prompts: list[str]) -> list[list[int]]:
    """Return the prompts' token ids under the verifier's own tokenizer."""
    tokenizer = _tokenizer(verifier)
    return [tokenizer.encode(prompt).ids for prompt in prompts]


@lru_cache(maxsize=4)
def _tokenizer(verifier: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(verifier / "tokenizer.json"))


def _token_count(verifier: Path) -> Encode:
    tokenizer = _tokenizer(verifier)
    return lambda text: len(tokenizer.encode(text).ids)
