"""Latency as the engine stamped it: vLLM's own histograms, read per block beside what the client saw.

The client (vLLM's benchmark client) times each token as its stream arrives. On a small machine the front end that
turns engine steps into stream chunks shares a core with the client and the other server, so a chunk can leave late:
the verifier alone's time to first token read 7-419 ms for the same prompt while each request took a constant
403-421 ms end to end (issue 51). vLLM's histograms are computed from the engine core's own output timestamps (from
the request's arrival at the front end), so they say what the engine served, however late the stream was delivered.

A client figure is published only where it agrees with the engine's within the tolerance (the engine's read as the
client computes its own: `Histogram.percentile`); otherwise the latency row says the measuring machine's front end
delayed it, and gives the engine's. That rule (`agrees`, `delayed`) is the kernel's (kernel/result/agreement.py):
the registry applies it again to an uploaded document.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kernel.result.agreement import agrees as agrees
from kernel.result.agreement import delayed as delayed

# The engine's histogram per figure of kernel.result.LATENCIES (TPOT is per request: its decode time over its tokens).
FAMILIES = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}


def _geometric(low: float, high: float, step: float) -> list[float]:
    bounds, bound = [], low
    while bound < high:
        bounds.append(float(f"{bound:.4g}"))
        bound *= step
    return bounds


# vLLM's default buckets are coarse for a toy engine (the first ITL bucket is 10 ms, a whole toy step is 3): its
# `--custom-histogram-buckets` makes them 15 % apart from 0.5 ms to 5 min (95 buckets), so a percentile read from
# them is within about 7 % of the engine's own, well inside TOLERANCE. The flag changes what the server's /metrics
# reports, nothing it serves: measurement-only, left out of the published `vllm serve` line.
BUCKETS = _geometric(0.0005, 300.0, 1.15)
BUCKET_FAMILIES = ("time_to_first_token", "inter_token_latency", "request_latency")


def buckets_flag() -> list[str]:
    """The server flags that give the latency histograms BUCKETS."""
    return ["--custom-histogram-buckets", json.dumps({family: BUCKETS for family in BUCKET_FAMILIES}, separators=(",", ":"))]


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram's cumulative bucket counts (upper bounds ascending, the last +inf), sum and count."""

    bounds: tuple[float, ...] = ()
    cumulative: tuple[float, ...] = ()
    total: float = 0.0
    count: float = 0.0

    def __sub__(self, earlier: Histogram) -> Histogram:
        if not earlier.bounds:
            return self
        return Histogram(self.bounds, tuple(a - b for a, b in zip(self.cumulative, earlier.cumulative, strict=True)),
                         self.total - earlier.total, self.count - earlier.count)  # fmt: skip

    def __add__(self, other: Histogram) -> Histogram:
        if not other.bounds:
            return self
        if not self.bounds:
            return other
        return Histogram(self.bounds, tuple(a + b for a, b in zip(self.cumulative, other.cumulative, strict=True)),
                         self.total + other.total, self.count + other.count)  # fmt: skip

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0-1) as Prometheus's histogram_quantile reads it: linear within the bucket that holds it."""
        if not self.count:
            return None
        rank = q * self.count
        at = bisect.bisect_left(self.cumulative, rank)
        if at >= len(self.bounds) - 1:  # in the +inf bucket: the highest finite bound is all that is known
            return self.bounds[-2] if len(self.bounds) > 1 else None
        low = self.bounds[at - 1] if at else 0.0
        below = self.cumulative[at - 1] if at else 0.0
        inside = self.cumulative[at] - below
        return low + (self.bounds[at] - low) * ((rank - below) / inside if inside else 1.0)

    # Prometheus's reading (`quantile`) takes rank q·count, the client's (metrics.percentile) the order statistics
    # around (count - 1)·q: at a level's 8-16 requests those are different requests. With 8, the client's p90 lies
    # 30 % of the way from the 7th-fastest request to the slowest, Prometheus's within the slowest's bucket: a TTFT
    # skewed by queueing read 12-29 % of honest levels as delayed (tests/kernel/test_delayed_label_rates.py). Read
    # the statistic the client computes, and the two differ by half a bucket and the network only.
    def percentile(self, q: float) -> float | None:
        """The q-quantile (0-1) as metrics.percentile computes it from exact figures: linear between the order
        statistics around (count - 1)·q, each read at the middle of its share of the bucket that holds it."""
        if not self.count:
            return None
        position = (self.count - 1) * q
        low, high = self._order_statistic(math.floor(position)), self._order_statistic(math.ceil(position))
        if low is None or high is None:
            return None
        return low + (high - low) * (position - math.floor(position))

    def _order_statistic(self, index: int) -> float | None:
        """The index-th smallest observation (from 0), read at the middle of its share of its bucket."""
        return self.quantile((index + 0.5) / self.count)


def parse(text: str) -> dict[str, Histogram]:
    """Each of FAMILIES' histograms in a /metrics exposition, summed over its labels; keyed as FAMILIES is."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {family: name for name, family in FAMILIES.items()}
    found: dict[str, Histogram] = {}
    for family in text_string_to_metric_families(text):
        if family.name in wanted and family.type == "histogram":
            found[wanted[family.name]] = _summed(family.samples)
    return found


def _summed(samples: Iterable[object]) -> Histogram:
    buckets: dict[float, float] = {}
    total = count = 0.0
    for sample in samples:
        name, labels, value = sample.name, sample.labels, sample.value  # type: ignore[attr-defined]
        if name.endswith("_bucket"):
            bound = float(labels["le"])
            buckets[bound] = buckets.get(bound, 0.0) + value
        elif name.endswith("_sum"):
            total += value
        elif name.endswith("_count"):
            count += value
    bounds = tuple(sorted(buckets))
    return Histogram(bounds, tuple(buckets[b] for b in bounds), total, count)


def since(now: Mapping[str, Histogram], then: Mapping[str, Histogram]) -> dict[str, Histogram]:
    """Each histogram's observations between two reads of the same server."""
    return {name: histogram - then.get(name, Histogram()) for name, histogram in now.items()}


def percentiles_ms(histogram: Histogram, percentiles: Sequence[int]) -> dict[str, float | None]:
    """The engine's percentiles (ms) from its histogram, keyed "p50" ..., computed as the client's are."""
    return {f"p{q}": None if (s := histogram.percentile(q / 100)) is None else s * 1000 for q in percentiles}
