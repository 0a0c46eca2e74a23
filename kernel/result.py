"""The certification result document: its types, its version, and the one place it is read.

A director returns a `ResultDocument` (kernel/result.schema.json describes the same shape
for other languages). The registry stores it as JSON and every reader, pages, API,
certificates, regressions and reproduce alike, goes through the functions here, so a new
schema version changes one module. `load` upgrades older documents as it reads them.

Version history:
- 1: the first document.
- 2: `environment.engine_build` names the engine build the figures were measured on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from kernel.builds import engine_build as build_among
from kernel.spec import SpecFields

SCHEMA_VERSION = 2
READABLE_VERSIONS = frozenset({1, 2})
STAGE_ORDER = ("fetch", "gate", "baseline", "speculative", "equivalence", "throughput", "verdict")


class Counts(TypedDict):
    drafts: int
    draft_tokens: int
    accepted: int
    accepted_per_position: list[int]


class Acceptance(TypedDict):
    mean_acceptance_length: float | None
    acceptance_rate: float | None
    per_position: list[float]
    counts: Counts


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


class SamplingTest(ChiSquare):
    prefix: int
    given_first_token: int


class Rates(TypedDict):
    tokens_per_second: float
    tokens_per_second_runs: list[float]
    ttft_p50: float | None
    itl_p50: float | None
    itl_p95: float | None


class Level(TypedDict):
    baseline: Rates
    speculative: Rates
    speedup: float
    speedup_interval: list[float]
    speedup_cv: float | None


class Throughput(TypedDict):
    levels: dict[str, Level]
    break_even_concurrency: float | None
    theoretical_bound: float | None
    per_category_speedup: dict[str, float]


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


class Verdict(TypedDict):
    verdict: str
    reasons: list[str]
    thresholds: dict[str, float]
    workloads: dict[str, WorkloadFigures]
    environment: Environment


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
    break_even_concurrency: float | None
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


class SpeedAtLevel(TypedDict):
    concurrency: int
    speedup: float
    interval: list[float]
    supports: str  # what the interval supports: faster, slower, or no measurable difference
    baseline_tokens_per_second: float | None
    speculative_tokens_per_second: float | None


def speed_label(interval: Sequence[float] | None, *, threshold: float = 1.0) -> str:
    """Return what a speedup's interval supports: faster only when all of it lies above `threshold`."""
    if not interval or len(interval) != 2:
        return "not measured"
    low, high = interval
    if low > threshold:
        return FASTER
    return SLOWER if high < threshold else NO_DIFFERENCE


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
                "supports": speed_label(interval),
                "baseline_tokens_per_second": baseline.get("tokens_per_second"),
                "speculative_tokens_per_second": speculative.get("tokens_per_second"),
            }
        )
    return rows


def break_even_bounds(document: ResultDocument | None) -> tuple[int | None, int | None]:
    """Return (the highest level measurably faster, the lowest level measurably slower).

    Break-even lies between them; levels whose interval straddles 1 are neither.
    """
    rows = speed_by_level(document)
    faster = [row["concurrency"] for row in rows if row["supports"] == FASTER]
    slower = [row["concurrency"] for row in rows if row["supports"] == SLOWER]
    return (max(faster) if faster else None, min(slower) if slower else None)


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
    return document


def _from_v1(document: ResultDocument) -> ResultDocument:
    """Version 1 named the engine build only through the package versions; name it as version 2 does."""
    environment: Environment = {**document["environment"]}
    environment.setdefault("engine_build", build_among(document["spec"].get("engine", ""), environment.get("versions", {})))
    return {**document, "schema_version": SCHEMA_VERSION, "environment": environment}


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
    return {
        "verdict": judged["verdict"] if judged else None,
        "mean_acceptance_length": accepted["mean_acceptance_length"] if accepted else None,
        "speedup": speedups(document),
        "per_category_speedup": measured.get("per_category_speedup", {}) if measured else {},
        "break_even_concurrency": measured.get("break_even_concurrency") if measured else None,
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
