"""The stage factory a worker uses by default: SpecHub's measuring stages, sharing one Workbench."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel.director import Stage
from kernel.result import STAGE_ORDER, ResultDocument
from kernel.spec import RunSpec
from workers import audit

SERVED = ("throughput", "smoke")  # the stages that start vLLM servers

if TYPE_CHECKING:  # the engines' imports wait until a stage runs
    from workers.workbench import Workbench


@dataclass
class _Shared:
    bench: Workbench | None = None
    serves: bool = False  # whether the throughput stage is among these: its servers may start early


@dataclass
class MeasuringStage:
    """Adapts a certification step `work(bench, report)` to the director's Stage protocol."""

    name: str
    work: Callable[[Workbench, Callable[[int], None]], Mapping[str, Any]]
    shared: _Shared

    def run(self, spec: RunSpec, document: ResultDocument, report: Callable[[int], None]) -> Mapping[str, Any]:
        from workers.workbench import Workbench

        if self.shared.bench is None or self.shared.bench.spec is not spec:
            if self.shared.bench is not None:  # another attempt: what the last one started is not this one's
                self.shared.bench.stop_early()
            self.shared.bench = Workbench.for_spec(spec)
            self.shared.bench.serves = self.shared.serves
        self.shared.bench.stages = document["stages"]
        with audit.counting(self.shared.bench.starts, self.name):
            return self.work(self.shared.bench, report)

    def close(self) -> None:
        """The run ended (the director says so, whatever the outcome): stop servers no stage took."""
        if self.shared.bench is not None:
            self.shared.bench.stop_early()


def default_stages() -> list[Stage]:
    """Return fetch → gate → baseline → speculative → equivalence → throughput → smoke → verdict."""
    return sharing_one_bench(STAGE_ORDER)


def unserved_stages() -> list[Stage]:
    """Every stage but the served ones (throughput, smoke): acceptance and equivalence, judged by the real verdict,
    which reads speed as not measured. For work that judges no speed, such as a reproduction that compares
    acceptance and greedy output only: it starts no server."""
    return sharing_one_bench(tuple(name for name in STAGE_ORDER if name not in SERVED))


def sharing_one_bench(names: tuple[str, ...]) -> list[Stage]:
    """The measuring stages named, in order, sharing one Workbench; the throughput stage's servers start early only
    when it is among them."""
    from workers import certification, speed

    shared = _Shared(serves="throughput" in names)
    return [MeasuringStage(name, getattr(speed if name == "throughput" else certification, name), shared) for name in names]
