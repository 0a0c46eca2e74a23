"""Re-run a certification from its certificate alone, and compare what it measures with what was certified."""

from __future__ import annotations

from dataclasses import dataclass

from kernel import certificates, result
from kernel.spec import ModelRef, Plan, RunSpec, Thresholds

TUPLES = ("concurrency", "thresholds", "smoke_engine_features", "acceptance_temperatures")  # rebuilt below


def spec_from_certificate(payload: certificates.Payload) -> RunSpec:
    """Return the run spec a certificate pins: repos at their shas, method, k, engine, hardware and plan."""
    inputs = payload["inputs"]
    plan = inputs["plan"]
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
        plan=Plan(
            # The other plan fields are stored as Plan holds them; mypy cannot match TypedDict items to keywords.
            **{key: value for key, value in plan.items() if key not in TUPLES},  # type: ignore[arg-type]
            concurrency=tuple(plan["concurrency"]),
            acceptance_temperatures=tuple(plan.get("acceptance_temperatures", ())),
            smoke_engine_features=_names(plan.get("smoke_engine_features")),
            thresholds=Thresholds(**plan["thresholds"]),
        ),
    )


def _names(stored: list[str] | tuple[str, ...] | None) -> tuple[str, ...] | None:
    return tuple(stored) if stored is not None else None


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


def compare(
    results: result.CertifiedResults, document: result.ResultDocument, *, rtol: float, speedup_rtol: float | None
) -> list[Comparison]:
    """Compare a certificate's results with a reproduced result document, figure by figure.

    Acceptance is judged within `rtol` and greedy exact match must be equal; speedup depends on the
    machine's load, so it is only judged when `speedup_rtol` is given.
    """
    certified = result.comparable_figures(results)
    reproduced = result.comparable_figures(result.certified_results(document))
    tolerances = {"acceptance": rtol, "exact": 0.0, "speedup": speedup_rtol}
    return [Comparison(name, value, reproduced.get(name), tolerances[name.split(":")[0]]) for name, value in certified.items()]
