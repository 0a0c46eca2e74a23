"""The stage factory a worker uses by default: SpecHub's measuring stages, sharing one Workbench."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workers.director import Stage
from workers.spec import RunSpec


@dataclass
class _Shared:
    bench: Any = None


@dataclass
class MeasuringStage:
    """Adapts a certification step `work(bench, report)` to the director's Stage protocol."""

    name: str
    work: Callable[[Any, Callable[[int], None]], dict[str, Any]]
    shared: _Shared

    def run(self, spec: RunSpec, document: dict[str, Any], report: Callable[[int], None]) -> dict[str, Any]:
        from workers.certification import Workbench

        if self.shared.bench is None or self.shared.bench.spec is not spec:
            self.shared.bench = Workbench.for_spec(spec)
        self.shared.bench.result = document["stages"]
        return self.work(self.shared.bench, report)


def default_stages() -> list[Stage]:
    """Return fetch → gate → baseline → speculative → equivalence → throughput → verdict."""
    from workers import certification as c

    shared = _Shared()
    steps = [c.fetch, c.gate, c.baseline, c.speculative, c.equivalence, c.throughput, c.verdict]
    return [MeasuringStage(step.__name__, step, shared) for step in steps]
