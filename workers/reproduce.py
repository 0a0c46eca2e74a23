"""Re-run a certification from its certificate alone, and compare what it measures with what was certified."""

from __future__ import annotations

from dataclasses import dataclass

from kernel import certificates, result
from kernel.spec import RunSpec, spec_of


def spec_from_certificate(payload: certificates.Payload) -> RunSpec:
    """Return the run spec a certificate pins: repos at their shas, method, k, engine, hardware and plan."""
    return spec_of(payload["inputs"], run_id=0, attempt=1)


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
