"""The figures as pages, exports and the API's summary show them: the headline summary, speed by level with its
label, latency rows, the servers, the machine's load, the measurement's plan and precision, and the levels
claimed in sequence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict, cast

from kernel.result.read import acceptance, engine_build, served_schedule, speedups, throughput, verdict
from kernel.result.schema import (
    BELOW_MARGIN,
    FASTER,
    LATENCIES,
    MACHINE_LIMITED,
    NO_DIFFERENCE,
    NOT_IN_SEQUENCE,
    NOT_IN_SEQUENCE_SLOWER,
    SLOWER,
    SLOWER_BELOW_MARGIN,
    KSpeed,
    Level,
    MachineLoad,
    ResultDocument,
    Servers,
    Summary,
    Throughput,
)
from kernel.spec import Thresholds
from kernel.stats import widened

# The practical margin a "faster" needs wholly above it, wherever "faster" is printed: a true 1.02x read "faster" at
# c=1 16 % of the time against 1, while the verdict on the same page, against 1.03, said "not by the margin".
MARGIN = Thresholds().min_speedup


class SpeedAtLevel(TypedDict):
    concurrency: int
    speedup: float
    interval: list[float]
    supports: str  # what the interval supports: faster, slower, or no measurable difference
    baseline_tokens_per_second: float | None
    speculative_tokens_per_second: float | None
    pairs: int  # the paired blocks the interval rests on (0: measured offline, version 2)
    stopping: str | None  # why the level stopped at that many (None: an older run's fixed count)
    dof: int  # the interval's t degrees of freedom: Stein's first stage less one, else the pairs less one
    limited_by: str  # the evidence that the measuring machine set this level's pace, where its blocks showed it; else ""


def interval_dof(figures: Level) -> int:
    stopping = figures.get("stopping")
    if stopping and stopping["reason"] != MACHINE_LIMITED:
        return max(1, stopping["first_pairs"] - stopping.get("prompts", 1))
    return max(1, len(figures.get("block_ratios") or []) - 1)


def speed_label(interval: Sequence[float] | None, *, threshold: float = MARGIN) -> str:
    """Return what a speedup's interval supports: faster only when all of it lies above `threshold` (the practical
    margin), slower only when all of it lies under 1 / `threshold`; beyond 1 but not wholly beyond the margin, a
    difference too small to claim. The one rule for "faster" and "slower"."""
    if not interval or len(interval) != 2:
        return "not measured"
    low, high = interval
    if low > threshold:
        return FASTER
    if low > 1:
        return BELOW_MARGIN
    if high < 1 / threshold:
        return SLOWER
    return SLOWER_BELOW_MARGIN if high < 1 else NO_DIFFERENCE


def margin_of(document: ResultDocument | None) -> float:
    """The practical margin the document's verdict applied (SPECHUB_THRESHOLD_MIN_SPEEDUP when it was judged)."""
    judged = verdict(document)
    return float((judged.get("thresholds") or {}).get("min_speedup", MARGIN)) if judged else MARGIN


def limited(figures: Level) -> bool:
    """Whether the measuring machine, not the pair, set the pace at this level: its probe said so (the stopping
    reason), or its timed blocks did (`limited_by`, the evidence, since issue 51)."""
    return ("stopping" in figures and figures["stopping"]["reason"] == MACHINE_LIMITED) or bool(figures.get("limited_by"))


def speed_by_level(document: ResultDocument | None) -> list[SpeedAtLevel]:
    """Return each concurrency level's speedup, interval and what the interval supports, lowest level first."""
    measured = throughput(document)
    if measured is None:
        return []
    rows: list[SpeedAtLevel] = []
    claims = level_claims(measured["levels"], margin_of(document))
    for level in sorted(measured["levels"], key=int):
        figures = measured["levels"][level]
        interval = list(figures.get("speedup_interval") or [])
        baseline, speculative = figures.get("baseline") or {}, figures.get("speculative") or {}
        rows.append(
            {
                "concurrency": int(level),
                "speedup": figures["speedup"],
                "interval": interval,
                "supports": claims[level],
                "baseline_tokens_per_second": baseline.get("tokens_per_second"),
                "speculative_tokens_per_second": speculative.get("tokens_per_second"),
                "pairs": len(figures.get("block_ratios") or []),
                "stopping": figures["stopping"]["reason"] if "stopping" in figures else None,
                "dof": interval_dof(figures),
                "limited_by": str(figures.get("limited_by") or ""),
            }
        )
    return rows


class LatencyRow(TypedDict):
    where: str  # "c=4", or "Poisson 7.5 req/s"
    metric: str  # one of LATENCIES
    baseline: dict[str, float | None]  # "p50" ... "p99", in ms: the figure to read (the engine's where `delayed`)
    speculative: dict[str, float | None]
    # The sides whose client figures the measuring machine's front end delayed (Rates.delayed): for those, the
    # figures above are the engine's own and `client` keeps what the client saw. Absent before issue 51.
    delayed: NotRequired[list[str]]
    client: NotRequired[dict[str, dict[str, float | None]]]


def latency_rows(document: ResultDocument | None) -> list[LatencyRow]:
    """Return every level's (and the rate point's) latency percentiles, baseline beside speculative."""
    measured = throughput(document)
    if measured is None:
        return []
    places: list[tuple[str, Level]] = [(f"c={level}", measured["levels"][level]) for level in sorted(measured["levels"], key=int)]
    if (point := measured.get("rate_point")) is not None:
        places.append((f"Poisson {point['request_rate']:.2f} req/s", point))
    return [row for where, figures in places for metric in LATENCIES if (row := _latency_row(where, figures, metric))]


def _latency_row(where: str, figures: Level, metric: str) -> LatencyRow | None:
    """One latency at one place, each side's figure the client's where it agreed with the engine's, else the engine's."""
    sides = ("baseline", "speculative")
    seen = {side: _percentiles_of(figures, side, metric, "latency_ms") for side in sides}
    delayed = [side for side in sides if metric in _listed(_rates(figures, side).get("delayed"))]
    shown = {side: _percentiles_of(figures, side, metric, "engine_latency_ms") if side in delayed else seen[side]
             for side in sides}  # fmt: skip
    if all(shown[side].get("p50") is None for side in sides):
        return None
    row: LatencyRow = {"where": where, "metric": metric, "baseline": shown["baseline"], "speculative": shown["speculative"]}
    if any("engine_latency_ms" in _rates(figures, side) for side in sides):
        row["delayed"] = delayed
        row["client"] = {side: seen[side] for side in delayed}
    return row


def _rates(figures: Level, side: str) -> Mapping[str, Any]:
    return _mapping(cast(Mapping[str, Any], figures).get(side))


def _percentiles_of(figures: Level, side: str, metric: str, key: str) -> dict[str, float | None]:
    """One side's percentiles of one latency, the client's (latency_ms) or the engine's; empty where not measured (or
    not numbers: a self-hosted worker's document is read, not trusted)."""
    found = _mapping(_mapping(_rates(figures, side).get(key)).get(metric))
    return {q: v for q, v in found.items() if v is None or (isinstance(v, int | float) and not isinstance(v, bool))}


def _mapping(value: object) -> Mapping[str, Any]:
    return cast(Mapping[str, Any], value) if isinstance(value, dict) else {}


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def servers(document: ResultDocument | None) -> Servers | None:
    """Return the servers' commands and published recipes, for serving-mode documents."""
    measured = throughput(document)
    return measured.get("servers") if measured else None


def machine_load(document: ResultDocument | None) -> MachineLoad | None:
    """Return the machine's load around the timed blocks, for serving-mode documents."""
    measured = throughput(document)
    return measured.get("load") if measured else None


class Measurement(TypedDict):
    """How a document's speed was measured, in brief, as the API gives it."""

    mode: str | None
    recipe: str | None  # the `vllm serve` line that was measured
    baseline_recipe: str | None
    output_tokens: int | None
    request_rate: float | None  # the Poisson point
    latency_speedup: float | None  # baseline over speculative mean E2E latency at that rate
    latency_speedup_interval: list[float]
    counters_agree: bool | None
    load: MachineLoad | None


class Precision(TypedDict):
    first_pairs: int
    most_pairs: int
    half_width_percent: float  # at the lowest level
    half_width_loaded_percent: float  # at the others


def precision(document: ResultDocument | None) -> Precision | None:
    """Return the precision the run's plan asked for; None for runs that timed a fixed count of pairs."""
    plan: Mapping[str, Any] = document["spec"].get("plan") or {} if document else {}
    if "most_pairs" not in plan:
        return None
    return {"first_pairs": plan["repeats"], "most_pairs": plan["most_pairs"], "half_width_percent": 100 * plan["half_width"],
            "half_width_loaded_percent": 100 * plan["half_width_loaded"]}  # fmt: skip


def measurement(document: ResultDocument | None) -> Measurement | None:
    """Return how speed was measured: the served commands, the Poisson point, the counter check, the load."""
    measured = throughput(document)
    if measured is None:
        return None
    ran, point, counted = measured.get("servers"), measured.get("rate_point"), measured.get("counters")
    return {
        "mode": measured.get("mode"),
        "recipe": served_line(ran["speculative_recipe"], ran) if ran else None,
        "baseline_recipe": served_line(ran["baseline_recipe"], ran) if ran else None,
        "output_tokens": ran["output_tokens"] if ran else None,
        "request_rate": point["request_rate"] if point else None,
        "latency_speedup": point["speedup"] if point else None,
        "latency_speedup_interval": point["speedup_interval"] if point else [],
        "counters_agree": counted["agree"] if counted else None,
        "load": measured.get("load"),
    }


def break_even_bounds(document: ResultDocument | None) -> tuple[int | None, int | None]:
    """Return (faster up to this level, slower from this level on), as level_claims claims them.

    Faster: the fixed sequence upward from the lowest level. Slower from: the lowest level from which every level
    above, bar those the measuring machine paced, is claimed slower. Break-even lies between them; levels whose
    interval straddles 1 are neither. With five levels labelled each on its own interval, some level read "faster"
    for a pair no faster anywhere 11.9 % of the time.
    """
    rows = speed_by_level(document)
    faster = [row["concurrency"] for row in rows if row["supports"] == FASTER]
    slower_from = None
    for row in reversed([row for row in rows if row["supports"] != MACHINE_LIMITED]):
        if row["supports"] != SLOWER:
            break
        slower_from = row["concurrency"]
    return (max(faster) if faster else None, slower_from)


def level_claims(levels: Mapping[str, Level], margin: float) -> dict[str, str]:
    """What each level claims, by the one procedure the rows, the break-even and the verdict all read: its own
    interval's label (or the measuring machine's), then "faster" in the fixed sequence upward and "slower" by
    slower_claims, each holding 2.5 % for the family of levels."""
    order = sorted(levels, key=int)
    intervals = [list(levels[level].get("speedup_interval") or []) for level in order]
    own = [MACHINE_LIMITED if limited(levels[level]) else speed_label(interval, threshold=margin)
           for level, interval in zip(order, intervals, strict=True)]  # fmt: skip
    # The same test at half the error rate: each interval widened to 97.5 % (Bonferroni for two), on its own dof.
    halved = [speed_label(widened(interval, interval_dof(levels[level]), 2), threshold=margin) == SLOWER
              for level, interval in zip(order, intervals, strict=True)]  # fmt: skip
    return dict(zip(order, slower_claims(in_sequence(own), halved), strict=True))


def in_sequence(labels: Sequence[str]) -> list[str]:
    """Fixed-sequence testing for "faster", lowest level first: claimed upward from the lowest level until the first
    that is not faster. Each claim is a one-sided test at 2.5 %, and a sequence that stops at its first non-rejection
    keeps the family's error at 2.5 % however many levels there are. A level outside the run claims nothing."""
    kept, running = list(labels), True
    for i, label in enumerate(kept):
        running = running and label == FASTER
        if label == FASTER and not running:
            kept[i] = NOT_IN_SEQUENCE
    return kept


def slower_claims(labels: Sequence[str], halved: Sequence[bool]) -> list[str]:
    """Claim "slower" where `labels` (each level's own, at 2.5 %) say so and the family's error allows: 2.5 % for
    all the levels together, split in two (a graphical procedure, Bretz et al. 2009). The lowest level (the verdict's)
    is tested on half, at 1.25 % (`halved`: its interval widened to 97.5 % lies under 1 / margin); the others on the
    other half, downward from the highest until the first that is not slower. A half not spent moves to the other:
    the lowest level claimed, the others are tested at the full 2.5 %; every other level claimed, so is the lowest.

    The fixed sequence from the highest level alone gave c=1 "slower" in 0.1 % of GPU runs of a pair 10 % slower
    everywhere at CV 8 %; this, 23 %; Holm over the levels, 5 % (tests/kernel/test_slower_error_rates.py). An order
    by each level's measured width would not hold its error: the narrowest interval is the one whose spread read low.
    Levels the measuring machine paced are outside the family: they neither claim nor stop the sequence.
    """
    family = [i for i, label in enumerate(labels) if label != MACHINE_LIMITED]
    if not family:
        return list(labels)
    lowest, rest = family[0], family[1:]
    own = [label == SLOWER for label in labels]
    lowest_first = halved[lowest]
    chain = _downward(rest, own if lowest_first else halved)
    claimed = set(chain) | ({lowest} if lowest_first or (len(chain) == len(rest) and own[lowest]) else set())
    return [NOT_IN_SEQUENCE_SLOWER if label == SLOWER and i not in claimed else label for i, label in enumerate(labels)]


def _downward(levels: Sequence[int], slower: Sequence[bool]) -> list[int]:
    """The levels claimed slower in the fixed sequence from the highest of `levels` down."""
    claimed = []
    for i in reversed(levels):
        if not slower[i]:
            break
        claimed.append(i)
    return claimed


def summary(document: ResultDocument | None) -> Summary | None:
    """Return the headline figures, or None for a document without stages."""
    if document is None or not document["stages"]:
        return None
    measured, accepted, judged = throughput(document), acceptance(document), verdict(document)
    faster, slower = break_even_bounds(document)
    return {
        "verdict": judged["verdict"] if judged else None,
        "mean_acceptance_length": accepted["mean_acceptance_length"] if accepted else None,
        "speedup": speedups(document),
        "per_category_speedup": measured.get("per_category_speedup", {}) if measured else {},
        "faster_up_to": faster,
        "slower_from": slower,
        "engine_build": engine_build(document),
        "serve": serve_command(document),
    }


def serve_command(document: ResultDocument | None) -> str | None:
    """The command the pair page tells people to run, as measured: the batch-size schedule where it was measured
    better than the fixed k, else the best k at the lowest level, else the published pair's own line."""
    measured, scheduled = throughput(document), served_schedule(document)
    if measured is None:
        return None
    servers = measured.get("servers")
    rows = best_k_of(measured)
    if scheduled and scheduled["serve_it"]:
        line: str | None = scheduled["recipe"]
    elif rows and rows[0]["recipe"]:
        line = rows[0]["recipe"]
    else:
        line = servers["speculative_recipe"] if servers else None
    return served_line(line, servers) if line else None


def served_line(line: str, servers: Servers | None) -> str:
    """A published `vllm serve` line as the servers ran it: after the environment they ran with that a user's server
    needs too (on CPU the KV cache and the preloaded libraries, issue 62 §4); as it is for older documents."""
    environment = servers.get("environment", {}) if servers else {}  # by name: a JSON column need not keep the order
    return " ".join([*(f"{name}={value}" for name, value in sorted(environment.items())), line])


class BestKRow(TypedDict):
    """One level's best k: every k's predicted speedup, and the best one's measured speedup with its interval."""

    concurrency: int
    best_k: int
    predicted: list[KSpeed]
    predicted_speedup: float  # the best k's
    measured_speedup: float | None
    interval: list[float]
    supports: str  # what the measured interval supports
    pairs: int
    recipe: str | None  # the `vllm serve` line at the best k, which was measured
    fitted_from_k: list[int]  # the two measured k's the predictions' draft cost was fitted from; empty: from one


def best_k_rows(document: ResultDocument | None) -> list[BestKRow]:
    """Return each level's best k, predicted and measured, lowest level first; empty before choices were made."""
    measured = throughput(document)
    return best_k_of(measured, margin=margin_of(document)) if measured else []


def best_k_of(measured: Throughput, *, margin: float = MARGIN) -> list[BestKRow]:
    """best_k_rows, from a throughput stage (a certificate's `results.throughput` as well as a document's)."""
    choice = measured.get("choice_of_k")
    if choice is None:
        return []
    rows: list[BestKRow] = []
    for level in sorted(choice["levels"], key=int):
        best = choice["levels"][level]
        k = best["best_k"]
        timed = best.get("measured") if k != choice["run_k"] else measured["levels"].get(level)
        interval = list(timed.get("speedup_interval") or []) if timed else []
        rows.append({
            "concurrency": int(level),
            "best_k": k,
            "predicted": best["predicted"],
            "predicted_speedup": next(row["predicted_speedup"] for row in best["predicted"] if row["k"] == k),
            "measured_speedup": timed["speedup"] if timed else None,
            "interval": interval,
            "supports": speed_label(interval, threshold=margin),
            "pairs": len(timed.get("block_ratios") or []) if timed else 0,
            "recipe": choice["recipes"].get(str(k)),
            "fitted_from_k": list(best.get("fitted_from_k") or []),
        })  # fmt: skip
    return rows
