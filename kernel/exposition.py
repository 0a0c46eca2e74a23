"""A vLLM server's Prometheus exposition (/metrics), read for its spec-decode counters.

`spechub watch` pushes what this reads to a deployment, and `spechub judge` (the registry's judge endpoint) holds a
saved exposition to a certificate: one reader, so the two never disagree on what a text counts. Each counter is
summed over its other labels (model_name, engine). Pure: no I/O and no Django; prometheus_client is imported when a
text is parsed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernel import live

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.samples import Sample

COUNTER_FAMILIES = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}
PER_POSITION_FAMILY = "vllm:spec_decode_num_accepted_tokens_per_pos"
REQUESTS_FAMILY = "vllm:request_success"
STARTED_FAMILY = "process_start_time_seconds"
SPEC_DECODE_PREFIX = "vllm:spec_decode_"
MAX_POSITIONS = live.MAX_POSITIONS  # draft positions: what a live reading holds
QUOTED_LINES, QUOTED_CHARS = 3, 100  # of the lines an error quotes from a metrics text


class Unreadable(ValueError):
    """The text is no exposition, or holds no spec-decode counters: the reason, for the person who gave it."""


@dataclass(frozen=True)
class Counters:
    """The spec-decode counters as the text gives them (cumulative since the server started)."""

    drafts: int
    draft_tokens: int
    accepted: int
    per_position: tuple[int, ...]
    requests: int  # finished requests (vllm:request_success, over its labels)
    started: float | None  # the server process's start, where the text exposes it


def read(text: str, *, source: str) -> Counters:
    """Parse a Prometheus exposition into its spec-decode counters; Unreadable says why not."""
    from prometheus_client.parser import text_string_to_metric_families

    counts = _Counts()
    try:
        for family in text_string_to_metric_families(text):
            counts.add(family, source)
    except ValueError as exc:
        if isinstance(exc, Unreadable):
            raise
        raise Unreadable(f"{source} is not a Prometheus exposition: {exc}") from None
    if not counts.speculating:
        raise Unreadable(f"speculative decoding is not on for this server (no vllm:spec_decode_* counters at {source})")
    if not counts.counted:
        raise Unreadable(f"{source} has vllm:spec_decode_* metrics but no counter watch can read "
                         f"(vllm:spec_decode_num_drafts_total{{...}} 5 is one): {_unread(text)}")  # fmt: skip
    positions = tuple(counts.per_position.get(i, 0) for i in range(max(counts.per_position, default=-1) + 1))
    totals = counts.totals
    return Counters(totals["drafts"], totals["draft_tokens"], totals["accepted"], positions, counts.requests, counts.started)


@dataclass
class _Counts:
    """The counters summed so far, and whether the text speaks of spec decoding at all."""

    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTER_FAMILIES.values(), 0))
    per_position: dict[int, int] = field(default_factory=dict)
    requests: int = 0
    started: float | None = None
    speculating: bool = False
    counted: int = 0  # the spec-decode counter samples summed

    def add(self, family: Metric, source: str) -> None:
        # prometheus_client's own text names the family X and its samples X_total; OpenMetrics-style text typed as X
        # (or not typed) makes each X_total sample a family of its own, named X_total, of type unknown: the same counter.
        name = family.name.removesuffix("_total")
        self.speculating = self.speculating or name.startswith(SPEC_DECODE_PREFIX)
        for sample in family.samples:
            if name == STARTED_FAMILY and math.isfinite(sample.value):
                self.started = sample.value if self.started is None else min(self.started, sample.value)  # the oldest
            elif sample.name.endswith("_total"):  # `_created` comes as its own gauge family in the text format
                self._count(name, sample, source)

    def _count(self, name: str, sample: Sample, source: str) -> None:
        if name in COUNTER_FAMILIES:
            self.totals[COUNTER_FAMILIES[name]] += _count_of(sample, source)
            self.counted += 1
        elif name == PER_POSITION_FAMILY:
            position = _position(sample, source)
            self.per_position[position] = self.per_position.get(position, 0) + _count_of(sample, source)
        elif name == REQUESTS_FAMILY:
            self.requests += _count_of(sample, source)


def _count_of(sample: Sample, source: str) -> int:
    if not (math.isfinite(sample.value) and sample.value >= 0):
        raise Unreadable(f"{source}: {sample.name} is {sample.value}, not a count")
    return int(sample.value)


def _position(sample: Sample, source: str) -> int:
    """The draft position a per-position sample counts; bounded, since a reading holds one count per position."""
    label = sample.labels.get("position", "0")
    try:
        position = int(label)
    except ValueError:
        position = -1
    if not 0 <= position < MAX_POSITIONS:
        raise Unreadable(f"{source}: {sample.name} has position {label[:20]!r}, not one of 0 to {MAX_POSITIONS - 1}")
    return position


def _unread(text: str) -> str:
    """The first few spec-decode lines, samples before comments, each cut short: enough to see what they look like."""
    lines = [line.strip() for line in text.splitlines() if SPEC_DECODE_PREFIX in line]
    lines.sort(key=lambda line: line.startswith("#"))
    return ", ".join(repr(line[:QUOTED_CHARS]) for line in lines[:QUOTED_LINES]) or "no lines"
