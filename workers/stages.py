"""The stage factory a worker uses by default: SpecHub's measuring stages, sharing one Workbench."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel.director import Stage
from kernel.result import STAGE_ORDER, ResultDocument
from kernel.spec import RunSpec

SERVED = ("throughput", "smoke")  # the stages that start vLLM servers

if TYPE_CHECKING:  # the engines' imports wait until a stage runs
    from workers.workbench import Workbench


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
        from workers.workbench import Workbench

        if self.shared.bench is None or self.shared.bench.spec is not spec:
            self.shared.bench = Workbench.for_spec(spec)
        self.shared.bench.stages = document["stages"]
        return self.work(self.shared.bench, report)


def default_stages() -> list[Stage]:
    """Return fetch → gate → baseline → speculative → equivalence → throughput → smoke → verdict."""
    return _sharing_one_bench(STAGE_ORDER)


def unserved_stages() -> list[Stage]:
    """Every stage but the served ones (throughput, smoke): acceptance and equivalence, judged by the real verdict,
    which reads speed as not measured. For work that judges no speed, such as a reproduction that compares
    acceptance and greedy output only: it starts no server."""
    return _sharing_one_bench(tuple(name for name in STAGE_ORDER if name not in SERVED))


def _sharing_one_bench(names: tuple[str, ...]) -> list[Stage]:
    from workers import certification, speed

    shared = _Shared()
    return [MeasuringStage(name, getattr(speed if name == "throughput" else certification, name), shared) for name in names]
