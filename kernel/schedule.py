"""The batch-size schedule vLLM's Dynamic SD takes (`num_speculative_tokens_per_batch_size`: inclusive ranges of
the running batch size, each with its k), composed from what a certification measured at each concurrency level.

Each level's range runs from that level up to the next one's (batch sizes between two levels take the lower
level's k, the one measured nearest below them); the first range starts at 1, as vLLM requires, and the last runs
to MAX_BATCH. A level where the pair is measurably slower drafts nothing (k = 0); elsewhere it drafts the best k
measured there. Adjacent ranges with the same k are one range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from kernel.formats.vllm_support import VLLM_VERSION, dynamic_k_takes_ranges

MAX_BATCH = 1024  # beyond any level measured; vLLM caps a range at its own largest batch


class Range(NamedTuple):
    start: int
    end: int
    k: int


class AtLevel(NamedTuple):
    concurrency: int
    best_k: int
    slower: bool  # the interval at that level lies under 1


def compose(levels: Sequence[AtLevel]) -> list[Range]:
    """The schedule for these levels (any order); empty without a level."""
    ordered = sorted(levels)
    ranges: list[Range] = []
    for i, level in enumerate(ordered):
        start = 1 if i == 0 else level.concurrency
        end = ordered[i + 1].concurrency - 1 if i + 1 < len(ordered) else MAX_BATCH
        k = 0 if level.slower else level.best_k
        if ranges and ranges[-1].k == k:
            ranges[-1] = ranges[-1]._replace(end=end)
        else:
            ranges.append(Range(start, end, k))
    return ranges


def k_at(ranges: Sequence[Range], batch: int) -> int:
    """The k the schedule gives a running batch of this size."""
    return next((r.k for r in ranges if r.start <= batch <= r.end), ranges[-1].k if ranges else 0)


def speculative_config(config: dict[str, object], ranges: Sequence[Range], build: str = VLLM_VERSION) -> dict[str, object]:
    """The pair's speculative config with the schedule, in the form vLLM `build` takes (by default the pinned one's):
    vLLM caps each range's k at num_speculative_tokens, which stays the run's k unless a range asks for more."""
    run_k = int(str(config["num_speculative_tokens"]))
    most = max([run_k, *(r.k for r in ranges)])
    return {**config, "num_speculative_tokens": most, "num_speculative_tokens_per_batch_size": written(ranges, build)}


def written(ranges: Sequence[Range], build: str = VLLM_VERSION) -> list[list[int]] | dict[str, int]:
    """The schedule as vLLM `build` reads it: a list of [start, end, k] ranges, or an older build's {"start-end": k}."""
    if dynamic_k_takes_ranges(build):
        return [list(r) for r in ranges]
    return {f"{r.start}-{r.end}": r.k for r in ranges}
