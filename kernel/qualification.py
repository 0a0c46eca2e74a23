"""The engine qualification record: controls that tell an engine defect from a pair defect.

One record per engine build x hardware class x dtype. It is written by
workers/qualification.py, stored by the registry, cited by digest in pair
verdicts and certificates, and read through this module only.

Controls (each with bundled models, so their right answer is known):
- verifier-alone: sampling without speculation matches the verifier's exact distribution;
- self-draft: the verifier as its own draft accepts every greedy token (AL = k + 1), and
  its speculated token's distribution is the verifier's;
- one per method the build serves with a known-good bundled draft (draft_model, eagle3,
  the reduced-vocabulary eagle3, ngram): the same sampling test.
A sampling control runs each probe with n samples in one request and in n separate
requests, and states the total variation it detects with its power.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict, cast

from kernel.result import Power as Power
from kernel.result import TwoTokenTest
from kernel.typed import mismatch, unstorable

SCHEMA_VERSION = 1
KIND = "spechub.engine-qualification"

# inconclusive: nothing rejected, but a test drew too few samples to reach the power it states.
Outcome = Literal["pass", "fail", "inconclusive", "not-supported"]
PASS: Outcome = "pass"  # noqa: S105  # an outcome, not a password
FAIL: Outcome = "fail"
INCONCLUSIVE: Outcome = "inconclusive"
NOT_SUPPORTED: Outcome = "not-supported"
OUTCOMES: tuple[Outcome, ...] = (PASS, FAIL, INCONCLUSIVE, NOT_SUPPORTED)


class Probe(TwoTokenTest):
    """One prefix's test: its first two tokens, sampled `samples` times, against their exact joint distribution."""

    prefix: str


class Mode(TypedDict):
    mode: str  # "one-request" (n samples in one request) or "separate-requests"
    outcome: Outcome
    probes: list[Probe]


class Greedy(TypedDict):
    """The self-draft's greedy acceptance: every drafted token must be accepted."""

    expected_acceptance_length: float
    acceptance_length: float | None
    drafts: int
    outcome: Outcome


class Control(TypedDict):
    name: str
    method: str | None  # the speculative method it qualifies; None for the verifier alone and for a detector
    draft: str | None  # the bundled draft, by repo name
    outcome: Outcome
    summary: str  # one line a person reads
    sampling: list[Mode]
    greedy: NotRequired[Greedy]
    error: NotRequired[str]  # the engine's own message, for a control it could not run
    detector: NotRequired[bool]  # run with a lossy sampler on purpose: it passes when the sampling test rejects
    seconds: NotRequired[float]  # engine start included


class Record(TypedDict):
    kind: str
    schema_version: int
    engine: str
    engine_build: str
    hardware: str
    dtype: str
    k: int
    temperature: float
    alpha: float
    power: float
    tv: float
    seed: int
    versions: dict[str, str]
    device: str
    controls: list[Control]
    seconds: float
    digest: str


def digest_of(record: Mapping[str, Any]) -> str:
    """Return the sha256 of the record's canonical JSON, its own digest left out."""
    body = {key: value for key, value in record.items() if key != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class UnreadableQualification(ValueError):
    """A document that is not a qualification record this code reads, or whose digest does not match."""


def load(raw: Mapping[str, Any]) -> Record:
    """Return `raw` as a record after checking its kind, version and digest."""
    if raw.get("kind") != KIND or raw.get("schema_version") != SCHEMA_VERSION:
        raise UnreadableQualification(f"not a {KIND} version {SCHEMA_VERSION} document")
    if raw.get("digest") != digest_of(raw):
        raise UnreadableQualification("its digest does not match its content")
    return cast(Record, dict(raw))


def readable(raw: Mapping[str, Any]) -> Record:
    """Return `raw` as a record, as `load` does, once every field is of its type: a record from outside (a self-hosted
    worker's) is read by the engines pages, the API and every verdict that cites it, for good."""
    record = load(raw)
    if where := unstorable(raw):
        raise UnreadableQualification(f"its {where}")
    if wrong := mismatch(raw, Record, "record"):
        raise UnreadableQualification(wrong)
    return record


def relevant_controls(record: Record, method: str) -> list[Control]:
    """Return the controls a pair of `method` depends on: the verifier alone, and that method's own."""
    return [c for c in record["controls"] if c["method"] in (None, method) and c["outcome"] != NOT_SUPPORTED]


def failing_controls(record: Record, method: str) -> list[Control]:
    return [c for c in relevant_controls(record, method) if c["outcome"] == FAIL]


def has_method_control(record: Record, method: str) -> bool:
    """Whether a control of `method` passed on this build, which is what lets a pair's rejection be its own."""
    return any(c["method"] == method and c["outcome"] == PASS for c in relevant_controls(record, method))


def reference(record: Record) -> dict[str, str]:
    """Return how a verdict cites the record: its digest and what it qualifies."""
    return {key: str(record[key]) for key in ("digest", "engine", "engine_build", "hardware", "dtype")}
