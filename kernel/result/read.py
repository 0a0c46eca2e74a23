"""The accessors every reader goes through: a stage, the verdict, the figures, the summary, the certified results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kernel.result.acceptance_schema import Acceptance
from kernel.result.property_schema import Properties
from kernel.result.schema import (
    CertifiedResults,
    Environment,
    Equivalence,
    ResultDocument,
    ServedSchedule,
    Smoke,
    Throughput,
    Verdict,
    WorkloadFigures,
)
from kernel.result.starts_schema import Start


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


def starts(document: ResultDocument | None) -> list[Start]:
    """Every engine and server the run started, in order; empty for documents made before issue 62 listed them."""
    found = verdict(document)
    return list(found.get("starts", [])) if found else []


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


def served_schedule(document: ResultDocument | None) -> ServedSchedule | None:
    """Return the Dynamic SD schedule served and timed, where one was (kernel/result/schema.ServedSchedule)."""
    measured = throughput(document)
    choice = measured.get("choice_of_k") if measured else None
    return choice.get("schedule") if choice else None


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
