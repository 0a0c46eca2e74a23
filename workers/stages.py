"""The stage factory a worker uses by default: SpecHub's measuring stages, sharing one Workbench."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel.director import Stage
from kernel.result import ResultDocument
from kernel.spec import RunSpec

if TYPE_CHECKING:  # the engines' imports wait until a stage runs
    from workers.certification import Workbench


@dataclass
class _Shared:
    bench: Workbench | None = None


@dataclass
class MeasuringStage:
    """Adapts a certification step `work(bench, report)` to the director's Stage protocol."""

    name: str
    work: Callable[[Workbench, Callable[[int], None]], Mapping[str, Any]]
    shared: _Shared

    def run(self, spec: RunSpec, document: ResultDocument, report: Callable[[int], None]) -> Mapping[str, Any]:
        from workers.certification import Workbench

        if self.shared.bench is None or self.shared.bench.spec is not spec:
            self.shared.bench = Workbench.for_spec(spec)
        self.shared.bench.stages = document["stages"]
        return self.work(self.shared.bench, report)


def default_stages() -> list[Stage]:
    """Return fetch → gate → baseline → speculative → equivalence → throughput → smoke → verdict."""
    from workers import certification as c

    shared = _Shared()
    steps: list[Callable[[Workbench, Callable[[int], None]], Mapping[str, Any]]] = [
        c.fetch, c.gate, c.baseline, c.speculative, c.equivalence, c.throughput, c.smoke, c.verdict,
    ]  # fmt: skip
    return [MeasuringStage(step.__name__, step, shared) for step in steps]
