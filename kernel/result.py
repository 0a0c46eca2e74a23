"""The certification result document: its types, its version, and the one place it is read.

A director returns a `ResultDocument` (kernel/result.schema.json describes the same shape
for other languages). The registry stores it as JSON and every reader, pages, API,
certificates, regressions and reproduce alike, goes through the functions here, so a new
schema version changes one module. `load` upgrades older documents as it reads them.

Version history:
- 1: the first document.
- 2: `environment.engine_build` names the engine build the figures were measured on.
- 3: speed is measured against two servers in paired blocks (`throughput.mode` "serving"):
  each level carries its block ratios, requests/s and TTFT/TPOT/ITL/E2E percentiles in ms;
  the throughput stage adds the servers' commands, a Poisson rate point, the machine's load
  and the served counters checked against the offline ones. Version 2's offline figures
  are read as mode "offline", with the percentiles it had. Later, still version 3 because
  readers need not change: the verdict may carry `properties` (each property judged and
  attributed) and `qualification` (the engine qualification it cites), and a `smoke` stage
  may hold the serving-feature grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict, cast

from kernel.builds import engine_build as build_among
from kernel.spec import SpecFields

SCHEMA_VERSION = 3
READABLE_VERSIONS = frozenset({1, 2, 3})
LATENCIES = ("ttft", "tpot", "itl", "e2e")  # time to first token, per output token, between tokens, end to end
PERCENTILES = (50, 90, 95, 99)
STAGE_ORDER = ("fetch", "gate", "baseline", "speculative", "equivalence", "throughput", "smoke", "verdict")


class Counts(TypedDict):
    drafts: int
    draft_tokens: int
    accepted: int
    accepted_per_position: list[int]


class AtK(TypedDict):
    k: int
    mean_acceptance_length: float


class Acceptance(TypedDict):
    mean_acceptance_length: float | None
    acceptance_rate: float | None
    per_position: list[float]  # cumulative: P(positions 1..i all accepted), per drafting step
    counts: Counts
    prompts: NotRequired[int]  # prompts with their own counters; absent where the engine did not count per request
    mean_acceptance_length_interval: NotRequired[list[float]]  # 95 %, over prompts; absent below 8 prompts
    by_k: NotRequired[list[AtK]]  # AL read at each k up to the K that ran (metrics.acceptance_by_k)


class Divergence(TypedDict):
    prompt: int
    token: int


class Greedy(TypedDict):
    exact_match: float | None
    prompts: int
    divergences: list[Divergence]


class ChiSquare(TypedDict):
    samples: int
    bins: int
    statistic: float
    dof: int
    p_value: float


class Power(TypedDict):
    """What a test detects: any total variation ≥ tv over its bins, with this power, at this level."""

    tv: float
    power: float
    alpha: float
    samples_needed: int


class TwoTokenTest(ChiSquare):
    """The joint test of a prefix's first two tokens (workers/two_tokens.py), with the power it reached."""

    observed_tv: float
    power: Power
    detectable_tv: float  # what the samples actually drawn detect with the stated power


class SamplingTest(ChiSquare):
    """A pair's own test on one prefix of the suite. Documents before the joint test (2026-12-03) tested the
    second token given the modal first one, with no power stated: they carry given_first_token instead."""

    prefix: int
    given_first_token: NotRequired[int]
    observed_tv: NotRequired[float]
    power: NotRequired[Power]
    detectable_tv: NotRequired[float]


class Rates(TypedDict):
    """One server at one level, over all its blocks."""

    tokens_per_second: float  # output tokens/s, the mean over blocks
    tokens_per_second_runs: list[float]  # each block's
    requests_per_second: float | None
    latency_ms: dict[str, dict[str, float | None]]  # LATENCIES -> {"p50", "p90", "p95", "p99"}, over all requests


class Stopping(TypedDict):
    """How many pairs a level took, and why it stopped there (Stein's two-stage rule, workers/metrics.py)."""

    first_pairs: int  # timed before the rule looked
    most_pairs: int
    target_half_width: float  # relative: 0.05 is ±5 %
    half_width: float  # what the interval has
    reason: str  # one of STOPPING_REASONS


class Level(TypedDict):
    baseline: Rates
    speculative: Rates
    speedup: float  # the geometric mean of the paired block ratios
    speedup_interval: list[float]  # its 95 % interval (Student t on the log ratios; Stein's where `stopping` is)
    speedup_cv: float | None
    block_ratios: list[float]  # speculative over baseline tok/s, one per A B (or B A) pair
    requests_per_block: int
    stopping: NotRequired[Stopping]
    # The client's CPU seconds over wall time (1.0: a whole core), the median block's; and the concurrency
    # each side's requests achieved (the sum of their latencies over the block's wall time).
    client_busy: NotRequired[float]
    achieved_concurrency: NotRequired[dict[str, float]]


class RatePoint(Level):
    """Requests arriving as a Poisson process: `speedup` is baseline over speculative mean E2E latency."""

    request_rate: float


class MachineLoad(TypedDict):
    """The machine around the timed blocks, so a reader can judge a noisy run."""

    load_average_before: list[float]
    load_average_after: list[float]
    wall_seconds: float
    other_cpu_seconds: float  # CPU time used by processes outside the measurement
    other_cpu_share: float  # of all cores over the wall time
    cpu_count: int


class Servers(TypedDict):
    """The two servers: the commands that ran, and the `vllm serve` lines the pair page publishes."""

    baseline_command: list[str]
    speculative_command: list[str]
    baseline_recipe: str
    speculative_recipe: str
    start_seconds: float
    output_tokens: int


class ServedCounters(TypedDict):
    """The speculative server's /metrics counters on the greedy prompts, against the offline engine's."""

    served: Counts
    offline: Counts
    agree: bool


class Throughput(TypedDict):
    levels: dict[str, Level]
    # The crossing of point estimates, with no interval: documents before 2026-12-03 carry it; nothing reads it.
    break_even_concurrency: NotRequired[float | None]
    theoretical_bound: float | None
    per_category_speedup: dict[str, float]
    mode: str  # "serving"; "offline" for version-2 documents
    servers: Servers | None
    rate_point: RatePoint | None
    load: MachineLoad | None
    counters: ServedCounters | None


class SmokeFeature(TypedDict):
    """One serving feature with speculation: equal, differs, runs, fails, not-supported, speculation off or
    parameter ignored (workers/smoke.py)."""

    feature: str
    outcome: str
    detail: str
    divergence: NotRequired[dict[str, int]]  # the first diverging request and token
    error: NotRequired[str]  # the engine's own message


class Smoke(TypedDict):
    features: list[SmokeFeature]
    seconds: float


class Equivalence(TypedDict):
    greedy: dict[str, Greedy]
    reference: dict[str, Greedy] | None
    sampling: list[SamplingTest]


class WorkloadEquivalence(TypedDict, total=False):
    greedy_exact_match: float | None
    divergences: list[Divergence]
    reference_exact_match: float | None


class WorkloadThroughput(TypedDict, total=False):
    speedup: float | None


class WorkloadFigures(TypedDict):
    acceptance: Acceptance
    equivalence: WorkloadEquivalence
    throughput: WorkloadThroughput


class Suite(TypedDict):
    suite: str
    sha256: str
    prompts: NotRequired[int]  # the distinct prompts measured; never the prompts themselves
    private: NotRequired[bool]  # a user's own workload


class Environment(TypedDict, total=False):
    versions: dict[str, str]
    engine_build: str
    hardware_class: str
    cpu: str
    cpu_count: int | None
    engine: dict[str, object]  # the engine's own manifest: its arguments, as the engine reports them
    baseline_engine: dict[str, object]
    dtype: str
    enforce_eager: bool
    k: int
    seed: int
    workloads: Suite
    speculative_config: dict[str, object] | None


class PropertyVerdict(TypedDict):
    """One property's judgement: its outcome, whose fault a failure is (pair, engine, or None), and why."""

    outcome: str
    fault: str | None
    reason: str
    evidence: dict[str, Any]


class Properties(TypedDict):
    acceptance: PropertyVerdict
    greedy: PropertyVerdict
    sampling: PropertyVerdict
    speed: PropertyVerdict


class Verdict(TypedDict):
    verdict: str
    reasons: list[str]
    thresholds: dict[str, float]
    workloads: dict[str, WorkloadFigures]
    environment: Environment
    # Since per-property verdicts (kernel/verdict.py); absent from older documents.
    properties: NotRequired[Properties]
    qualification: NotRequired[dict[str, str] | None]  # the engine qualification it was judged with


class BaselineCache(TypedDict):
    key: str
    hit: bool


class BaselineStage(TypedDict):
    cache: BaselineCache
    start_seconds: float
    manifest: dict[str, object]


class SpeculativeStage(TypedDict):
    start_seconds: float
    manifest: dict[str, object]
    acceptance: Acceptance


class Stages(TypedDict, total=False):
    """Each stage's part; a director given fewer stages (tests, partial runs) leaves the rest out."""

    fetch: dict[str, str | None]  # the pinned commits fetched
    gate: dict[str, object]  # the gate's report, as kernel.formats.Report.as_dict gives it
    baseline: BaselineStage
    speculative: SpeculativeStage
    equivalence: Equivalence
    throughput: Throughput
    smoke: Smoke  # since the smoke tier; absent from older documents
    verdict: Verdict


class ResultDocument(TypedDict):
    schema_version: int
    spec: SpecFields
    stages: Stages
    workloads: dict[str, WorkloadFigures]
    environment: Environment


class Summary(TypedDict):
    """The headline figures of one document, as listings, regressions and the catalog use them."""

    verdict: str | None
    mean_acceptance_length: float | None
    speedup: dict[str, float]
    per_category_speedup: dict[str, float]
    faster_up_to: int | None  # break_even_bounds: the fixed sequence upward from c=1
    slower_from: int | None
    engine_build: str


class CertifiedAcceptance(TypedDict):
    acceptance: Acceptance | None


class CertifiedEquivalence(TypedDict):
    greedy: dict[str, Greedy] | None
    reference: dict[str, Greedy] | None
    sampling: list[SamplingTest] | None


class CertifiedResults(TypedDict):
    """The part of a document a certificate carries; the raw sweeps stay with the run."""

    workloads: dict[str, WorkloadFigures]
    speculative: CertifiedAcceptance
    equivalence: CertifiedEquivalence
    throughput: Throughput | None


FASTER, SLOWER, NO_DIFFERENCE = "faster", "slower", "no measurable difference"
BELOW_MARGIN = "faster, but not by the margin"
# A level where the measuring machine (the benchmark client, or requests short of the concurrency asked), not the
# pair, set the pace: shown, never in a verdict or a break-even.
MACHINE_LIMITED = "limited by the measuring machine"
# Its own interval excludes 1, but a level before it in the fixed sequence did not show the same (in_sequence).
NOT_IN_SEQUENCE = "not claimed: an earlier level in the sequence was not"
REACHED, NOT_REACHED = "precision reached", "precision not reached at the most pairs"
STOPPING_REASONS = (REACHED, NOT_REACHED, MACHINE_LIMITED)


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


def interval_dof(figures: Level) -> int:
    stopping = figures.get("stopping")
    if stopping and stopping["reason"] != MACHINE_LIMITED:
        return max(1, stopping["first_pairs"] - 1)
    return max(1, len(figures.get("block_ratios") or []) - 1)


def speed_label(interval: Sequence[float] | None, *, threshold: float = 1.0) -> str:
    """Return what a speedup's interval supports: faster only when all of it lies above `threshold` (a practical
    margin, 1 or more); above 1 but not wholly above the margin, a gain too small to certify."""
    if not interval or len(interval) != 2:
        return "not measured"
    low, high = interval
    if low > threshold:
        return FASTER
    if low > 1:
        return BELOW_MARGIN
    return SLOWER if high < 1 else NO_DIFFERENCE


def limited(figures: Level) -> bool:
    """Whether the measuring machine, not the pair, set the pace at this level."""
    return "stopping" in figures and figures["stopping"]["reason"] == MACHINE_LIMITED


def speed_by_level(document: ResultDocument | None) -> list[SpeedAtLevel]:
    """Return each concurrency level's speedup, interval and what the interval supports, lowest level first."""
    measured = throughput(document)
    if measured is None:
        return []
    rows: list[SpeedAtLevel] = []
    for level in sorted(measured["levels"], key=int):
        figures = measured["levels"][level]
        interval = list(figures.get("speedup_interval") or [])
        baseline, speculative = figures.get("baseline") or {}, figures.get("speculative") or {}
        rows.append(
            {
                "concurrency": int(level),
                "speedup": figures["speedup"],
                "interval": interval,
                "supports": MACHINE_LIMITED if limited(figures) else speed_label(interval),  # in sequence below
                "baseline_tokens_per_second": baseline.get("tokens_per_second"),
                "speculative_tokens_per_second": speculative.get("tokens_per_second"),
                "pairs": len(figures.get("block_ratios") or []),
                "stopping": figures["stopping"]["reason"] if "stopping" in figures else None,
                "dof": interval_dof(figures),
            }
        )
    for row, supports in zip(rows, in_sequence([row["supports"] for row in rows]), strict=True):
        row["supports"] = supports
    return rows


class LatencyRow(TypedDict):
    where: str  # "c=4", or "Poisson 7.5 req/s"
    metric: str  # one of LATENCIES
    baseline: dict[str, float | None]  # "p50" ... "p99", in ms
    speculative: dict[str, float | None]


def latency_rows(document: ResultDocument | None) -> list[LatencyRow]:
    """Return every level's (and the rate point's) latency percentiles, baseline beside speculative."""
    measured = throughput(document)
    if measured is None:
        return []
    places: list[tuple[str, Level]] = [(f"c={level}", measured["levels"][level]) for level in sorted(measured["levels"], key=int)]
    if (point := measured.get("rate_point")) is not None:
        places.append((f"Poisson {point['request_rate']:.2f} req/s", point))
    rows: list[LatencyRow] = []
    for where, figures in places:
        for metric in LATENCIES:
            baseline, speculative = (_percentiles_of(figures, side, metric) for side in ("baseline", "speculative"))
            if baseline.get("p50") is not None or speculative.get("p50") is not None:
                rows.append({"where": where, "metric": metric, "baseline": baseline, "speculative": speculative})
    return rows


def _percentiles_of(figures: Level, side: str, metric: str) -> dict[str, float | None]:
    """One side's percentiles of one latency; empty where an older document did not measure them."""
    rates: Mapping[str, Any] = cast(Mapping[str, Any], figures).get(side) or {}
    found: dict[str, float | None] = (rates.get("latency_ms") or {}).get(metric) or {}
    return found


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
        "recipe": ran["speculative_recipe"] if ran else None,
        "baseline_recipe": ran["baseline_recipe"] if ran else None,
        "output_tokens": ran["output_tokens"] if ran else None,
        "request_rate": point["request_rate"] if point else None,
        "latency_speedup": point["speedup"] if point else None,
        "latency_speedup_interval": point["speedup_interval"] if point else [],
        "counters_agree": counted["agree"] if counted else None,
        "load": measured.get("load"),
    }


def break_even_bounds(document: ResultDocument | None) -> tuple[int | None, int | None]:
    """Return (faster up to this level, slower from this level), each by the fixed sequence in_sequence() keeps.

    Break-even lies between them; levels whose interval straddles 1 are neither. With five levels labelled
    each on its own interval, some level read "faster" for a pair no faster anywhere 11.9 % of the time.
    """
    rows = speed_by_level(document)
    faster = [row["concurrency"] for row in rows if row["supports"] == FASTER]
    slower = [row["concurrency"] for row in rows if row["supports"] == SLOWER]
    return (max(faster) if faster else None, min(slower) if slower else None)


def in_sequence(labels: Sequence[str]) -> list[str]:
    """Fixed-sequence testing over the levels, lowest first: "faster" is claimed upward from the lowest level until
    the first that is not faster, "slower" downward from the highest until the first that is not slower. Each claim
    is a one-sided test at 2.5 %, and a sequence that stops at its first non-rejection keeps the family's error at
    2.5 % per direction however many levels there are. A level outside its run claims neither."""
    kept = list(labels)
    for order, claim in ((range(len(kept)), FASTER), (range(len(kept) - 1, -1, -1), SLOWER)):
        running = True
        for i in order:
            running = running and kept[i] == claim
            if kept[i] == claim and not running:
                kept[i] = NOT_IN_SEQUENCE
    return kept


class UnreadableResult(ValueError):
    """The document is not a result document this code can read."""


def load(raw: Mapping[str, Any] | None) -> ResultDocument | None:
    """Return `raw` as a current result document (upgrading older versions); None for no document."""
    if not raw:
        return None
    version = raw.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise UnreadableResult(f"Result schema version {version!r}; this code reads {sorted(READABLE_VERSIONS)}.")
    document = cast(ResultDocument, {"spec": {}, "stages": {}, "workloads": {}, "environment": {}, **raw})
    if version == 1:
        document = _from_v1(document)
    if version in (1, 2):
        document = _from_v2(document)
    return document


def _from_v1(document: ResultDocument) -> ResultDocument:
    """Version 1 named the engine build only through the package versions; name it as version 2 does."""
    environment: Environment = {**document["environment"]}
    environment.setdefault("engine_build", build_among(document["spec"].get("engine", ""), environment.get("versions", {})))
    return {**document, "schema_version": 2, "environment": environment}


def _from_v2(document: ResultDocument) -> ResultDocument:
    """Version 2 timed offline waves: keep its figures, say so, and move its percentiles (seconds) into ms."""
    old: Mapping[str, Any] = document["stages"].get("throughput") or {}
    if "levels" not in old:
        return {**document, "schema_version": SCHEMA_VERSION}
    levels = {name: _level_from_v2(level) for name, level in old["levels"].items()}
    extra = {"mode": "offline", "servers": None, "rate_point": None, "load": None, "counters": None}
    stages: Stages = {**document["stages"], "throughput": cast(Throughput, {**old, "levels": levels, **extra})}
    return {**document, "schema_version": SCHEMA_VERSION, "stages": stages}


def _level_from_v2(level: Mapping[str, Any]) -> Level:
    """Move a version-2 level's percentiles (seconds, under flat keys) into version 3's `latency_ms`."""

    def rates(old: Mapping[str, Any]) -> Rates:
        def ms(key: str) -> float | None:
            return old[key] * 1000 if old.get(key) is not None else None

        latency = {name: dict.fromkeys(f"p{q}" for q in PERCENTILES) for name in LATENCIES}
        latency["ttft"]["p50"], latency["itl"]["p50"], latency["itl"]["p95"] = ms("ttft_p50"), ms("itl_p50"), ms("itl_p95")
        kept = {key: value for key, value in old.items() if key not in ("ttft_p50", "itl_p50", "itl_p95")}
        return cast(Rates, {"tokens_per_second_runs": [], **kept, "requests_per_second": None, "latency_ms": latency})

    sides = {side: rates(level[side]) for side in ("baseline", "speculative") if side in level}
    return cast(Level, {"block_ratios": [], "requests_per_block": 0, **level, **sides})


def stage(document: ResultDocument | None, name: str) -> Mapping[str, Any]:
    """Return one stage's part, or an empty mapping when the document has none."""
    if document is None:
        return {}
    stages: Mapping[str, object] = document["stages"]
    return cast(Mapping[str, Any], stages.get(name) or {})


def verdict(document: ResultDocument | None) -> Verdict | None:
    """Return the verdict stage, or None when the run did not reach a verdict."""
    part = stage(document, "verdict")
    return cast(Verdict, part) if "verdict" in part else None


def smoke(document: ResultDocument | None) -> Smoke | None:
    """Return the serving-feature grid; None for documents measured before the smoke tier."""
    found = stage(document, "smoke")
    return cast(Smoke, found) if found else None


def properties(document: ResultDocument | None) -> Properties | None:
    """Return the per-property verdicts the document was judged with; None for older documents."""
    found = verdict(document)
    return found.get("properties") if found else None


def acceptance(document: ResultDocument | None) -> Acceptance | None:
    """Return the suite-wide acceptance the speculative engine's counters gave."""
    found = stage(document, "speculative").get("acceptance")
    return cast(Acceptance, found) if found else None


def throughput(document: ResultDocument | None) -> Throughput | None:
    """Return the throughput sweep's figures."""
    part = stage(document, "throughput")
    return cast(Throughput, part) if "levels" in part else None


def equivalence(document: ResultDocument | None) -> Equivalence | None:
    """Return the greedy, reference and sampling equivalence figures."""
    part = stage(document, "equivalence")
    return cast(Equivalence, part) if part else None


def levels(document: ResultDocument | None) -> list[int]:
    """Return the concurrency levels measured, in increasing order."""
    measured = throughput(document)
    return sorted(int(level) for level in measured["levels"]) if measured else []


def block_ratios(document: ResultDocument | None, level: str = "1") -> list[float]:
    """Return the paired block ratios a level's speedup was measured from (none where it was not)."""
    measured = throughput(document)
    figures = measured["levels"].get(level) if measured else None
    return list(figures.get("block_ratios") or []) if figures else []


def speedups(document: ResultDocument | None) -> dict[str, float]:
    """Return the speedup at each measured concurrency level ("1", "2", ...)."""
    measured = throughput(document)
    return (
        {level: figures["speedup"] for level, figures in measured["levels"].items() if figures.get("speedup") is not None}
        if measured
        else {}
    )


def workloads(document: ResultDocument | None) -> dict[str, WorkloadFigures]:
    """Return the per-workload figures, by category."""
    return document["workloads"] if document else {}


def environment(document: ResultDocument | None) -> Environment:
    """Return what the figures depend on: versions, hardware, engine arguments."""
    return document["environment"] if document else {}


def engine_build(document: ResultDocument | None) -> str:
    """Return the engine build the document was measured on ('' when it does not say)."""
    return environment(document).get("engine_build", "")


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
    }


def certified_results(document: ResultDocument) -> CertifiedResults:
    """Return what a certificate states of the results: acceptance, equivalence, throughput, workloads."""
    accepted, equal = acceptance(document), equivalence(document)
    return {
        "workloads": workloads(document),
        "speculative": {"acceptance": accepted},
        "equivalence": {
            "greedy": equal.get("greedy") if equal else None,
            "reference": equal.get("reference") if equal else None,
            "sampling": equal.get("sampling") if equal else None,
        },
        "throughput": throughput(document),
    }


def comparable_figures(results: CertifiedResults) -> dict[str, float | None]:
    """Return the figures reproduce compares, named `<kind>:<figure>`; kinds are acceptance, exact and speedup."""
    accepted, measured = results["speculative"]["acceptance"], results["throughput"]
    level_1 = measured["levels"].get("1") if measured else None
    figures: dict[str, float | None] = {
        "acceptance:mean_acceptance_length": accepted["mean_acceptance_length"] if accepted else None,
        "acceptance:acceptance_rate": accepted["acceptance_rate"] if accepted else None,
        "speedup:concurrency 1": level_1["speedup"] if level_1 else None,
    }
    for category, found in sorted(results["workloads"].items()):
        figures[f"acceptance:{category} AL"] = (found.get("acceptance") or {}).get("mean_acceptance_length")
        figures[f"exact:{category} greedy exact match"] = (found.get("equivalence") or {}).get("greedy_exact_match")
    return figures
