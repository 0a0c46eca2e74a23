"""Issue 63 §2: the "delayed" latency label fires when the front end delayed the stream, not for the network's jitter
or the histogram's buckets (simulation, no database, no process).

Each simulated level sends `n` requests. The engine makes each request's first chunk after its TTFT and one chunk a
step after that; its four figures are binned into the servers' histogram buckets (engine_latency.BUCKETS) and read
by the worker's own code (`engine_latency.percentiles_ms` on a `Histogram`), as a level's histogram deltas are. On
an honest machine the request reaches the server, and each chunk the client, 1-3 ms (or 0-3 ms) late, in order; the
client computes its percentiles exactly (`metrics.percentile`'s linear interpolation, numpy's default).
`agreement.delayed` then labels the level, as the worker and the registry do. A front end at fault holds the first
chunk back (300 ms, or 0-400 ms as issue 51 measured: the verifier alone's TTFT 7-419 ms at a constant end to end),
or sends the chunks in bunches.

The engines: the toy verifier (3 ms steps, a chunk a token, TTFT 7-20 ms, about 400 ms end to end), the toy pair
(8 ms steps, five tokens a chunk), the toy verifier at c=4 (TTFT skewed by queueing, some steps stalled by another
request's prefill), and a GPU's scale (7-9 ms steps, 256 tokens, two seconds end to end).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest

from kernel.result import LATENCIES, PERCENTILES
from kernel.result.agreement import delayed
from workers import engine_latency, metrics

Array = npt.NDArray[np.float64]
LEVELS = 200  # a cell's levels where the client is honest: none read delayed (5 % may)
FAULTY = 100  # where the front end is at fault: the label must name all of them
REQUESTS = (8, 16, 32, 48)
EDGES = np.array(engine_latency.BUCKETS) * 1000  # ms
KEYS = [f"p{q}" for q in PERCENTILES]


@dataclass(frozen=True)
class Engine:
    """How a simulated engine serves a level's requests."""

    tokens: int = 128
    per_chunk: int = 1  # tokens a stream chunk carries: the pair's accepted drafts arrive together
    step_ms: float = 3.0
    step_spread: float = 0.05  # a step's lognormal sigma
    ttft_ms: tuple[float, float] = (7.0, 20.0)  # uniform, by the prompt's length
    queueing: float = 0.0  # above c=1, the lognormal sigma queueing multiplies TTFT by
    stalls: float = 0.0  # the share of steps another request's prefill slows 2-10x


ENGINES = {
    "toy verifier, c=1": Engine(),
    "toy pair, c=1": Engine(per_chunk=5, step_ms=8.0, ttft_ms=(11.0, 18.0)),
    "toy verifier, c=4": Engine(ttft_ms=(10.0, 14.0), queueing=0.8, step_spread=0.15, stalls=0.02),
    "GPU verifier, c=1": Engine(tokens=256, step_ms=7.0, ttft_ms=(15.0, 40.0)),
    "GPU pair, c=8": Engine(tokens=256, per_chunk=3, step_ms=9.0, ttft_ms=(25.0, 35.0), queueing=0.8, step_spread=0.1,
                            stalls=0.02),
}  # fmt: skip
HONEST = {"each message 1-3 ms late": (1.0, 3.0), "0-3 ms late": (0.0, 3.0)}


@dataclass(frozen=True)
class Level:
    """Each latency's figures over a level's requests, one row a level (ms): the engine's and what the client saw."""

    engine: dict[str, Array]
    client: dict[str, Array]


def served(
    rng: np.random.Generator, engine: Engine, n: int, late_ms: tuple[float, float], *, levels: int = LEVELS,
    hold: Array | None = None, bunch: int = 1,
) -> Level:  # fmt: skip
    """`levels` levels of `n` requests; `hold`: each request's first chunk held until that long after it was made."""
    chunks = engine.tokens // engine.per_chunk
    ttft = rng.uniform(*engine.ttft_ms, (levels, n)) * np.exp(rng.normal(0, engine.queueing, (levels, n)))
    speed = np.exp(rng.normal(0, 0.05, (levels, 1, 1)))  # levels run at slightly different speeds
    steps = engine.step_ms * speed * np.exp(rng.normal(0, engine.step_spread, (levels, n, chunks - 1)))
    steps *= np.where(rng.random(steps.shape) < engine.stalls, rng.uniform(2, 10, steps.shape), 1.0)
    made = ttft[..., None] + np.concatenate([np.zeros((levels, n, 1)), np.cumsum(steps, axis=-1)], axis=-1)
    # From the client's send: the request reaches the server late, then each chunk the client; a stream stays in order.
    sent = rng.uniform(*late_ms, (levels, n, 1))
    seen = np.maximum.accumulate(sent + made + rng.uniform(*late_ms, made.shape), axis=-1)
    if hold is not None:
        seen = np.maximum.accumulate(np.maximum(seen, sent + made[..., :1] + hold[..., None]), axis=-1)
    if bunch > 1:  # each chunk leaves with the last of its bunch
        padded = np.concatenate([seen, np.repeat(seen[..., -1:], -chunks % bunch, axis=-1)], axis=-1)
        seen = np.repeat(padded.reshape(levels, n, -1, bunch)[..., -1:], bunch, axis=-1).reshape(levels, n, -1)[..., :chunks]
    first, last = seen[..., 0], seen[..., -1]
    return Level(
        engine={"ttft": ttft, "tpot": steps.sum(-1) / (engine.tokens - 1), "itl": steps.reshape(levels, -1),
                "e2e": made[..., -1]},
        client={"ttft": first, "tpot": (last - first) / (engine.tokens - 1),
                "itl": np.diff(seen, axis=-1).reshape(levels, -1), "e2e": last},
    )  # fmt: skip


def histograms(values: Array) -> list[engine_latency.Histogram]:
    """Each level's observations (ms) as the server's /metrics would count them: cumulative, `le` each bound."""
    at = np.searchsorted(EDGES, values, side="left") + np.arange(len(values))[:, None] * (len(EDGES) + 1)
    cumulative = np.cumsum(np.bincount(at.ravel(), minlength=len(values) * (len(EDGES) + 1)).reshape(len(values), -1), axis=1)
    bounds = (*engine_latency.BUCKETS, float("inf"))
    return [
        engine_latency.Histogram(bounds, tuple(row.tolist()), float(total) / 1000, float(values.shape[1]))
        for row, total in zip(cumulative.astype(float), values.sum(axis=1), strict=True)
    ]


Reading = Callable[[engine_latency.Histogram], dict[str, float | None]]
Rule = Callable[[Mapping[str, Mapping[str, float | None]], Mapping[str, Mapping[str, float | None]]], list[str]]


def worker_reading(histogram: engine_latency.Histogram) -> dict[str, float | None]:
    return engine_latency.percentiles_ms(histogram, PERCENTILES)


def labelled(level: Level, reading: Reading = worker_reading, rule: Rule = delayed) -> dict[str, float]:
    """The share of levels whose label names each latency."""
    engine = {name: [reading(h) for h in histograms(level.engine[name])] for name in LATENCIES}
    client = {name: np.percentile(level.client[name], PERCENTILES, axis=1).T.tolist() for name in LATENCIES}
    levels = len(level.engine["ttft"])
    named = [
        rule({name: dict(zip(KEYS, client[name][i], strict=True)) for name in LATENCIES},
             {name: engine[name][i] for name in LATENCIES})
        for i in range(levels)
    ]  # fmt: skip
    return {name: sum(name in names for names in named) / levels for name in LATENCIES}


@pytest.mark.parametrize("late_ms", HONEST.values(), ids=HONEST.keys())
@pytest.mark.parametrize("engine", ENGINES.values(), ids=ENGINES.keys())
def test_an_honest_client_reads_delayed_in_at_most_5_percent_of_levels_for_each_latency(engine, late_ms):
    rng = np.random.default_rng(63)
    rates = {n: labelled(served(rng, engine, n, late_ms)) for n in REQUESTS}
    assert all(rate <= 0.05 for by_name in rates.values() for rate in by_name.values()), rates


def _held(n: int, how: str) -> Array:
    """How long each request's first chunk is held (ms), FAULTY levels of `n`."""
    if how == "every request 300 ms":  # the stand-in of tests/workers/test_engine_latency.py
        return np.full((FAULTY, n), 300.0)
    if how == "one request 300 ms":
        return np.pad(np.full((FAULTY, 1), 300.0), ((0, 0), (0, n - 1)))
    return np.random.default_rng(51).uniform(0, 400, (FAULTY, n))  # issue 51: TTFT 7-419 ms at a constant end to end


@pytest.mark.parametrize("how", ["every request 300 ms", "one request 300 ms", "0-400 ms, as measured"])
@pytest.mark.parametrize("engine", ENGINES.values(), ids=ENGINES.keys())
def test_a_first_chunk_held_back_is_always_labelled(engine, how):
    # Except one request of 48 where queueing spreads TTFT as widely itself (the GPU pair at c=8: p99 near 200 ms),
    # whose 300 ms more the client's p99 shows as less than 25 % more: 99 % of levels (87 % before issue 63).
    always = 0.95 if engine is ENGINES["GPU pair, c=8"] and how == "one request 300 ms" else 1.0
    rng = np.random.default_rng(51)
    for n in (8, 48):
        rates = labelled(served(rng, engine, n, HONEST["0-3 ms late"], levels=FAULTY, hold=_held(n, how)))
        assert rates["ttft"] >= always, (n, rates)


def test_a_first_chunk_held_back_also_labels_the_gaps_it_shortened_on_the_toy_verifier():
    """The stand-in's case: the verifier alone's whole stream flushed after the held first chunk, so its TPOT and
    ITL are the client's figures shortened, not the engine's; its end to end is the engine's."""
    rng = np.random.default_rng(51)
    held = _held(8, "every request 300 ms")
    level = served(rng, ENGINES["toy verifier, c=1"], 8, HONEST["0-3 ms late"], levels=FAULTY, hold=held)
    assert labelled(level) == {"ttft": 1.0, "tpot": 1.0, "itl": 1.0, "e2e": 0.0}


@pytest.mark.parametrize("bunch", [3, 8, 128])
@pytest.mark.parametrize("engine", ENGINES.values(), ids=ENGINES.keys())
def test_chunks_sent_in_bunches_label_the_gaps_between_them(engine, bunch):
    """Bunched, most gaps the client sees are 0.0 ms, shorter than any step the engine took (issue 51's ITL p50)."""
    rng = np.random.default_rng(8)
    for n in (8, 48):
        level = served(rng, engine, n, HONEST["0-3 ms late"], levels=FAULTY, bunch=bunch)
        assert np.median(level.client["itl"]) == 0.0
        assert labelled(level)["itl"] == 1.0


def prometheus_reading(histogram: engine_latency.Histogram) -> dict[str, float | None]:
    return {f"p{q}": None if (s := histogram.quantile(q / 100)) is None else s * 1000 for q in PERCENTILES}


def before(client: Mapping[str, Mapping[str, float | None]], engine: Mapping[str, Mapping[str, float | None]]) -> list[str]:
    """The rule until issue 63: within 25 % either way, plus 5 ms for TTFT and E2E only."""
    return [name for name in LATENCIES if not all(_within_before(name, client[name][key], engine[name][key]) for key in KEYS)]


def _within_before(name: str, seen: float | None, stamped: float | None) -> bool:
    slack = 5.0 if name in ("ttft", "e2e") else 0.0
    return seen is None or stamped is None or abs(seen - stamped) <= stamped * 0.25 + slack


def test_the_simulation_sees_what_the_review_saw_under_the_rule_before():
    """The same honest clients under Prometheus's reading and the rule before: jitter read a 3 ms step's ITL as
    delayed at every level, and a queued TTFT's 8 requests as delayed in about a fifth of them."""
    rng = np.random.default_rng(63)
    jittered = served(rng, ENGINES["toy verifier, c=1"], 16, HONEST["each message 1-3 ms late"], levels=FAULTY)
    queued = served(rng, ENGINES["toy verifier, c=4"], 8, (0.0, 0.0))
    rates = labelled(jittered, prometheus_reading, before)["itl"], labelled(queued, prometheus_reading, before)["ttft"]
    assert rates[0] > 0.9 and rates[1] > 0.1, rates


def test_the_engines_percentiles_are_the_clients_statistic_read_from_its_buckets():
    values = [8.0, 9.0, 9.5, 10.0, 11.0, 12.0, 15.0, 60.0]  # a queued TTFT's 8 requests (ms)
    histogram = histograms(np.array([values]))[0]
    read, exact = worker_reading(histogram), {f"p{q}": metrics.percentile(values, q) or 0.0 for q in PERCENTILES}
    assert all(read[key] == pytest.approx(exact[key], rel=0.08) for key in exact), (read, exact)  # half a bucket
    assert (prometheus_reading(histogram)["p90"] or 0) > 2 * exact["p90"]  # Prometheus's rank: the slowest request
    one = histograms(np.array([[10.0]]))[0]
    assert one.percentile(0.5) == one.percentile(0.99) == pytest.approx(0.01, rel=0.075)  # one request: its own
    assert engine_latency.Histogram().percentile(0.5) is None
