"""Director stages injected by tests (test doubles for the measuring stages).

Workers load them through SPECHUB_DIRECTOR_STAGES. Each stage appends a line
to $SPECHUB_TEST_MARKERS/<run>.log, so a test can count what really ran, in
which attempt, in which process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernel.builds import installed_engine_build
from kernel.director import Stage
from kernel.errors import InfraError, UserError
from kernel.result import ResultDocument
from kernel.spec import RunSpec

Action = Callable[[RunSpec, Callable[[int], None]], dict[str, Any]]


def _mark(spec: RunSpec, event: str) -> None:
    markers = os.environ.get("SPECHUB_TEST_MARKERS")
    if markers:
        with (Path(markers) / f"{spec.run_id}.log").open("a") as log:
            log.write(f"{event} attempt={spec.attempt} pid={os.getpid()}\n")


@dataclass
class InjectedStage:
    name: str
    action: Action

    def run(self, spec: RunSpec, document: ResultDocument, report: Callable[[int], None]) -> dict[str, Any]:
        _mark(spec, f"start {self.name}")
        result = self.action(spec, report)
        _mark(spec, f"end {self.name}")
        return result


def _quick(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    report(50)
    return {"ok": True}  # the gate's part is the gate's own report: any object


def _fetched(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    """The pinned commits, as the real fetch stage records them (a self-hosted upload is read as the pages read it)."""
    report(50)
    return {"draft": spec.draft.sha if spec.draft else None, "verifier": spec.verifier.sha}


def _baseline(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    report(50)
    return {"cache": {"key": "injected", "hit": False}, "start_seconds": 0.0, "manifest": {"engine": "injected"}}


def _verdict(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    """A certified verdict with made-up figures, on the engine build really installed here: whole acceptance figures
    of a run at k = 4, as a self-hosted upload must hold them (kernel/result/check.py)."""
    counts = {"drafts": 40, "draft_tokens": 160, "accepted": 100, "accepted_per_position": [36, 28, 20, 16]}
    acceptance = {"mean_acceptance_length": 3.5, "acceptance_rate": 0.625, "per_position": [0.9, 0.7, 0.5, 0.4],
                  "counts": counts, "source": "injected test stage"}  # fmt: skip
    return {
        "verdict": "certified",
        "reasons": [],
        "thresholds": asdict(spec.plan.thresholds),
        "workloads": {"chat": {"acceptance": acceptance, "equivalence": {}, "throughput": {}}},
        "environment": {"engine_build": installed_engine_build(spec.engine)},
    }


def _hang_on_first_attempt(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    if spec.attempt == 1:
        for second in range(120):  # long enough for the test to kill this worker
            report(second % 100)
            time.sleep(1)
    return _baseline(spec, report)  # the stage it stands in for, whole: a self-hosted upload is read whole


def _slow(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    time.sleep(float(os.environ.get("SPECHUB_TEST_SLOW_SECONDS", "1")))
    return _baseline(spec, report)


def _user_error(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    raise UserError("run:invalid-spec", "The injected gate refuses this pair.")


def _infra_error(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    raise InfraError("worker:crashed", "The injected stage lost its engine.")


def _crash(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    raise ZeroDivisionError("an injected bug")


def injected_quick_stages() -> list[Stage]:
    return [
        InjectedStage("fetch", _fetched),
        InjectedStage("gate", _quick),
        InjectedStage("baseline", _baseline),
        InjectedStage("verdict", _verdict),
    ]


def _replacing(name: str, action: Action) -> list[Stage]:
    """Return the quick stages with the one called `name` doing `action` instead."""
    return [InjectedStage(name, action) if stage.name == name else stage for stage in injected_quick_stages()]


def injected_stages_hanging_on_first_attempt() -> list[Stage]:
    return _replacing("baseline", _hang_on_first_attempt)


def injected_slow_stages() -> list[Stage]:
    return _replacing("baseline", _slow)


def injected_stages_refusing_at_gate() -> list[Stage]:
    return _replacing("gate", _user_error)


def injected_stages_failing_infra() -> list[Stage]:
    return _replacing("baseline", _infra_error)


def injected_stages_crashing() -> list[Stage]:
    return _replacing("baseline", _crash)


def _cancel_myself(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    from registry.runs.services import run_cancel

    run_cancel(run_id=spec.run_id)
    report(50)  # the next progress report finds the run cancelled
    return {"ok": True}


def injected_stages_cancelled_midway() -> list[Stage]:
    return _replacing("baseline", _cancel_myself)


def _ignore_soft_limit(spec: RunSpec, report: Callable[[int], None]) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            time.sleep(0.5)
        except BaseException:  # noqa: BLE001 - a stage that swallows the soft limit, on purpose
            _mark(spec, "swallowed soft limit")
    return {"ok": True}


def injected_stages_ignoring_the_soft_limit() -> list[Stage]:
    return _replacing("baseline", _ignore_soft_limit)


def real_stages_through_the_baseline() -> list[Stage]:
    """The real fetch, gate and baseline stages (the offline vLLM engine), then an injected verdict: the
    baseline's cache at work, without the speculative, equivalence and serving stages' minutes."""
    from workers.stages import sharing_one_bench

    return [*sharing_one_bench(("fetch", "gate", "baseline")), InjectedStage("verdict", _verdict)]


@dataclass
class DocumentStage:
    """A stage that sees the document so far (InjectedStage's actions see only the spec)."""

    name: str
    action: Callable[[RunSpec, ResultDocument], dict[str, Any]]

    def run(self, spec: RunSpec, document: ResultDocument, report: Callable[[int], None]) -> dict[str, Any]:
        return self.action(spec, document)


def _measured_on_the_workload(spec: RunSpec, document: ResultDocument) -> dict[str, Any]:
    """Made-up figures, after reading the workload the certify task left for this run (proving it is there)."""
    from workers.suites import load_suite

    suite = load_suite(spec.plan.workloads, spec.run_id)
    assert suite.private and suite.prompts() and suite.pending is None, spec.plan.workloads  # rendered as stored
    fast = spec.draft is not None and spec.draft.repo_id.endswith("llama-draft-1l")
    speeds = {"1": (1.6, [1.4, 1.8]), "4": (1.2, [1.1, 1.3])} if fast else {"1": (1.05, [0.9, 1.2]), "4": (0.8, [0.7, 0.9])}
    return {
        "acceptance": {
            "mean_acceptance_length": 3.4 if fast else 2.1,
            "acceptance_rate": 0.6,
            "per_position": [0.8, 0.6, 0.5, 0.4],
        },
        "prompts": len(suite.prompts()),
        "levels": {level: {"speedup": s, "speedup_interval": i, "block_ratios": [s] * 3} for level, (s, i) in speeds.items()},
    }


def _verdict_on_the_workload(spec: RunSpec, document: ResultDocument) -> dict[str, Any]:
    from kernel.verdict import judge_document

    measured: dict[str, Any] = dict(document["stages"]["speculative"])
    stages = {
        "speculative": {"acceptance": measured["acceptance"]},
        "equivalence": {"greedy": {"custom": {"exact_match": 1.0, "prompts": measured["prompts"], "divergences": []}},
                        "sampling": [{"p_value": 0.4, "samples": 1600, "dof": 15, "detectable_tv": 0.098}]},
        "throughput": {"levels": measured["levels"]},
    }  # fmt: skip
    level, reasons, properties = judge_document(stages, method=spec.method, thresholds=spec.plan.thresholds, qualification=None)
    document["stages"].update(stages)  # type: ignore[typeddict-item]  # the figures the registry reads, where it reads them
    custom = {"acceptance": measured["acceptance"], "equivalence": {"greedy_exact_match": 1.0}, "throughput": {}}
    suite = {"suite": "workload-v1", "sha256": spec.plan.workloads[7:], "prompts": measured["prompts"], "private": True}
    environment = {"engine_build": installed_engine_build(spec.engine), "workloads": suite}
    return {"verdict": level, "reasons": reasons, "thresholds": asdict(spec.plan.thresholds), "properties": properties,
            "qualification": None, "workloads": {"custom": custom}, "environment": environment}  # fmt: skip


def injected_stages_on_a_workload() -> list[Stage]:
    """Fetch and gate do nothing; `speculative` reads the run's workload file; the verdict is judged for real."""
    return [
        InjectedStage("fetch", _fetched),
        InjectedStage("gate", _quick),
        DocumentStage("speculative", _measured_on_the_workload),
        DocumentStage("verdict", _verdict_on_the_workload),
    ]
