"""Re-run a certification from its certificate alone, and compare what it measures with what was certified."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workers.spec import ModelRef, Plan, RunSpec, Thresholds


def spec_from_certificate(payload: dict[str, Any]) -> RunSpec:
    """Return the run spec a certificate pins: repos at their shas, method, k, engine, hardware and plan."""
    inputs = payload["inputs"]
    plan = dict(inputs["plan"])
    plan["concurrency"] = tuple(plan["concurrency"])
    plan["thresholds"] = Thresholds(**plan["thresholds"])
    draft = inputs.get("draft")
    return RunSpec(
        run_id=0,
        attempt=1,
        verifier=ModelRef(**inputs["verifier"]),
        draft=ModelRef(**draft) if draft else None,
        method=inputs["method"],
        num_speculative_tokens=inputs["num_speculative_tokens"],
        engine=inputs["engine"],
        hardware=inputs["hardware"],
        verifier_dtype=inputs.get("verifier_dtype", "auto"),
        draft_dtype=inputs.get("draft_dtype", "auto"),
        options=inputs.get("options", {}),
        plan=Plan(**plan),
    )


@dataclass(frozen=True)
class Comparison:
    figure: str
    certified: float | None
    reproduced: float | None
    tolerance: float | None  # relative; None: reported, not judged

    @property
    def matches(self) -> bool:
        if self.tolerance is None:
            return True
        if self.certified is None or self.reproduced is None:
            return self.certified == self.reproduced
        return abs(self.reproduced - self.certified) <= self.tolerance * abs(self.certified)


def compare(results: dict[str, Any], document: dict[str, Any], *, rtol: float, speedup_rtol: float | None) -> list[Comparison]:
    """Compare a certificate's results with a reproduced result document, figure by figure.

    Acceptance is judged within `rtol` and greedy exact match must be equal; speedup depends on the
    machine's load, so it is only judged when `speedup_rtol` is given.
    """
    certified, reproduced = _figures(results, results["workloads"]), _figures(document["stages"], document["workloads"])
    tolerances = {"acceptance": rtol, "exact": 0.0, "speedup": speedup_rtol}
    return [Comparison(name, value, reproduced.get(name), tolerances[name.split(":")[0]]) for name, value in certified.items()]


def _figures(stages: dict[str, Any], workloads: dict[str, Any]) -> dict[str, float | None]:
    acceptance = stages.get("speculative", {}).get("acceptance", {})
    figures = {
        "acceptance:mean_acceptance_length": acceptance.get("mean_acceptance_length"),
        "acceptance:acceptance_rate": acceptance.get("acceptance_rate"),
        "speedup:concurrency 1": stages.get("throughput", {}).get("levels", {}).get("1", {}).get("speedup"),
    }
    for category, measured in sorted(workloads.items()):
        figures[f"acceptance:{category} AL"] = measured.get("acceptance", {}).get("mean_acceptance_length")
        figures[f"exact:{category} greedy exact match"] = measured.get("equivalence", {}).get("greedy_exact_match")
    return figures
