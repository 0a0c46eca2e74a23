"""Whether two sets of figures in a document agree, worked out from the figures: the worker labels its document with
these (workers/engine_latency.py, workers/speed.py), and the registry labels an uploaded one again rather than read
the labels it was sent (issue 61 §3: engine latency 45x the client's was shown as agreeing within 25 %).

- the client's latency percentiles against the engine's own (vLLM's histograms): `agrees`, `delayed`;
- the served /metrics counters against the offline engine's: `ServedCounters.agree`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from typing import Any

from kernel.result.schema import LATENCIES, Level, Rates, ResultDocument

# The client's figure stands for the engine's when it is within TOLERANCE of it either way (the buckets are 15 %
# apart), plus, for the figures that include a request's round trip (TTFT, end to end), ROUND_TRIP_MS for what the
# loopback HTTP exchange itself adds (1-3 ms each way here). A gap between two chunks (ITL) also holds one chunk's
# lateness beside the other's, up to JITTER_MS: allowed on the late side only, since jitter widens the client's gaps,
# while gaps shorter than the engine's steps are the mark of a stream held back and flushed (ITL p50 0.0 ms). Without
# it, 1-3 ms jitter read a 3 ms toy step's ITL as delayed at every level (tests/kernel/test_delayed_label_rates.py;
# docs/measuring.md has the figures). TPOT needs none: over a request's gaps the lateness cancels out but the first
# chunk's and the last's, a few hundredths of a ms at 128 tokens.
TOLERANCE = 0.25
ROUND_TRIP_MS = 5.0
ROUND_TRIP = ("ttft", "e2e")
JITTER_MS = 3.0


def agrees(metric: str, client: Mapping[str, float | None], engine: Mapping[str, float | None]) -> bool:
    """Whether every percentile the client saw of `metric` is within the tolerance of the engine's.

    Two-sided: a stream whose chunks were held back and then sent together shows gaps shorter than any step the
    engine took (an ITL p50 of 0.0 ms), as well as first tokens later than the engine made them.
    """
    early = ROUND_TRIP_MS if metric in ROUND_TRIP else 0.0
    late = early + (JITTER_MS if metric == "itl" else 0.0)
    for key, seen in client.items():
        stamped = engine.get(key)
        if seen is None or stamped is None or not math.isfinite(seen):
            continue
        if not -(stamped * TOLERANCE + early) <= seen - stamped <= stamped * TOLERANCE + late:
            return False
    return True


def delayed(client: Mapping[str, Mapping[str, float | None]], engine: Mapping[str, Mapping[str, float | None]]) -> list[str]:
    """The latencies (in LATENCIES' order) whose client figures differ from the engine's beyond the tolerance: the
    measuring machine's."""
    return [name for name in LATENCIES if name in client and name in engine and not agrees(name, client[name], engine[name])]


def relabelled(document: ResultDocument) -> ResultDocument:
    """A copy of `document` with each label above worked out again from its figures."""
    found = copy.deepcopy(document)
    for rates in _rates(found):
        if "engine_latency_ms" in rates:
            rates["delayed"] = delayed(rates["latency_ms"], rates["engine_latency_ms"])
    counters = found["stages"].get("throughput", {}).get("counters")
    if counters is not None:
        counters["agree"] = counters["served"] == counters["offline"]
    return found


def _rates(document: ResultDocument) -> Iterator[Rates]:
    """Every side of every timed level: the levels, the rate point, which k's measured best and the schedule's."""
    for level in _levels(document):
        yield level["baseline"]
        yield level["speculative"]


def _levels(document: ResultDocument) -> Iterator[Level]:
    measured: Mapping[str, Any] = document["stages"].get("throughput") or {}
    yield from measured.get("levels", {}).values()
    if measured.get("rate_point") is not None:
        yield measured["rate_point"]
    choice: Mapping[str, Any] = measured.get("choice_of_k") or {}
    yield from (best["measured"] for best in choice.get("levels", {}).values() if "measured" in best)
    yield from (choice.get("schedule") or {}).get("levels", {}).values()
