"""The kinds of figure a result document holds, each with what its value may be (issue 61 §3).

The TypedDicts in schema.py, acceptance_schema.py and property_schema.py type their fields with these, so the one
description a reader is type-checked against also says what a figure means: a rate is from 0 to 1, a count or a
latency is never negative, a speedup is more than 0, an interval is [low, high], percentiles rise with their rank.
mypy reads each as its plain type; kernel.typed.mismatch holds a document from outside to the meaning too.
What fields must say of one another (an interval holds its point, AL lies in [1, k + 1]) is in coherence.py.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Annotated, Any, TypeAlias

from kernel.typed import SLACK, Bounds, LowHigh, Meaning

Share: TypeAlias = Annotated[float, Bounds(0, 1)]  # a rate, a probability, a share of a whole
Count: TypeAlias = Annotated[int, Bounds(0)]  # prompts, drafting steps, tokens, samples
Amount: TypeAlias = Annotated[float, Bounds(0)]  # seconds, milliseconds, tokens/s, a spread
Ratio: TypeAlias = Annotated[float, Bounds(0, above=True)]  # a speedup or a block ratio: a quotient of two rates
AtLeastOne: TypeAlias = Annotated[int, Bounds(1)]  # a k, a concurrency
Interval: TypeAlias = Annotated[list[float], LowHigh()]
ShareInterval: TypeAlias = Annotated[list[Share], LowHigh()]
RatioInterval: TypeAlias = Annotated[list[Ratio], LowHigh()]


@dataclass(frozen=True)
class Rising(Meaning):
    """Percentiles keyed "p50", "p90"...: a higher rank's figure is never below a lower one's (nulls aside)."""

    def problem(self, value: Any, where: str) -> str | None:
        ranked = sorted((int(key[1:]), key, figure) for key, figure in value.items() if _rank(key) and figure is not None)
        for (_, low_key, low), (_, high_key, high) in itertools.pairwise(ranked):
            if high < low - SLACK * max(1.0, abs(low)):
                return f"{where}.{high_key} ({high!r}) is below {where}.{low_key} ({low!r}): percentiles rise with their rank"
        return None


def _rank(key: str) -> bool:
    return key[:1] == "p" and key[1:].isascii() and key[1:].isdigit() and 0 < len(key) <= 4


Percentiles: TypeAlias = Annotated[dict[str, Amount | None], Rising()]  # one latency's, in ms: "p50" ... "p99"
