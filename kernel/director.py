"""The director drives the stages of one certification.

It takes a RunSpec and returns a result document; it knows nothing about the
database. Progress goes to a callback, which the Celery task turns into run
state, stage, percent and heartbeat.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

from kernel.errors import InfraError
from kernel.result import SCHEMA_VERSION, STAGE_ORDER, ResultDocument
from kernel.spec import RunSpec

__all__ = ["STAGE_ORDER", "Director", "Stage", "load_stages"]

Progress = Callable[[str, int], None]


class Stage(Protocol):
    """One step of a certification.

    `name` is one of STAGE_ORDER. `run` is called once per attempt, in order,
    with the spec, the document so far (read it, do not mutate it) and a
    `report(percent)` callback for progress inside the stage (0-100). It
    returns this stage's part of the result document, JSON-serialisable. It
    raises UserError or InfraError (kernel.errors) to end or retry the run.
    A stage may also have `close()`: the director calls it once the run ends,
    whatever its outcome, so what a stage started for a later one (servers)
    never outlives the run.
    """

    name: str

    def run(self, spec: RunSpec, document: ResultDocument, report: Callable[[int], None]) -> Mapping[str, Any]: ...


class Director:
    """Run stages in order and assemble the result document."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        if not stages:
            raise InfraError("director:no-stages")
        self.stages = list(stages)

    def run(self, spec: RunSpec, progress: Progress) -> ResultDocument:
        stages: dict[str, Mapping[str, Any]] = {}
        document = cast(ResultDocument, {"schema_version": SCHEMA_VERSION, "spec": spec.as_dict(), "stages": stages})
        try:
            for index, stage in enumerate(self.stages):
                report = self._reporter(stage.name, index, progress)
                report(0)
                stages[stage.name] = stage.run(spec, document, report)
                report(100)
        finally:
            for stage in self.stages:
                close = getattr(stage, "close", None)
                if callable(close):
                    close()
        verdict = stages.get("verdict", {})
        document["workloads"] = verdict.get("workloads", {})
        document["environment"] = verdict.get("environment", {})
        return document

    def _reporter(self, name: str, index: int, progress: Progress) -> Callable[[int], None]:
        span = 100 / len(self.stages)

        def report(percent: int) -> None:
            bounded = max(0, min(100, percent))
            progress(name, int(index * span + bounded * span / 100))

        return report


def load_stages(dotted_path: str) -> list[Stage]:
    """Return the stages made by the factory at `dotted_path` ('package.module.factory')."""
    module_name, _, attribute = dotted_path.rpartition(".")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InfraError("director:bad-stages", f"{dotted_path!r}: {exc}.") from None
    if not callable(factory):
        raise InfraError("director:bad-stages", f"{dotted_path!r} is not callable.")
    stages: list[Stage] = list(factory())
    return stages
