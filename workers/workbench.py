"""What one run's stages hand each other (the Workbench), and what an offline engine measured (Measured).

Raw data stays here; the result document gets figures. Documents name pinned repos and `python`, never a
worker's snapshot folders or interpreter (without_local_paths).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict, TypeVar, cast

from kernel import result
from kernel.formats import Report
from kernel.spec import RunSpec
from kernel.traffic import ChatTemplate
from kernel.traffic.templates import Switches
from workers import audit, serving
from workers.engines.base import EngineConfig, SpecCounters
from workers.suites import Suite, load_suite

Tick = Callable[[int], None]


Outputs = dict[str, list[list[int]]]  # token ids per prompt, by category (or by sampling prefix)


T = TypeVar("T")


class RawCounters(TypedDict):
    drafts: int
    draft_tokens: int
    accepted: int
    per_position: list[int]


class Counted(TypedDict):
    """Exact counters per category, and each prompt's own where the engine counts per request."""

    counters: dict[str, RawCounters]
    per_prompt: NotRequired[dict[str, list[RawCounters]]]


class Measured(Counted):
    """What one offline engine gave: outputs and exact counters, no timings. The baseline's is cached as JSON."""

    start_seconds: float
    greedy: Outputs
    samples: Outputs
    manifest: dict[str, object]
    by_temperature: NotRequired[dict[str, Counted]]  # the pair's counters at each sampled temperature of the plan
    by_mode: NotRequired[dict[str, Counted]]  # the pair's counters with the template's thinking switch on and off
    by_mode_seconds: NotRequired[float]  # how long those two passes took


@dataclass
class Workbench:
    """What one run's stages hand each other; raw data stays here, the document gets figures."""

    spec: RunSpec
    suite: Suite
    paths: dict[str, Path] = field(default_factory=dict)
    gate: Report | None = None
    engine_config: dict[str, object] | None = None
    prompts: list[list[int]] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    # The verifier's chat template, and the switches it takes (its thinking switch: acceptance by mode, issue 53).
    template: ChatTemplate | None = None
    switches: Switches = field(default_factory=Switches)
    baseline: Measured | None = None
    speculative: Measured | None = None
    # The smoke tier's request features, run on the throughput stage's servers, and how long they took.
    smoke_requests: list[result.SmokeFeature] = field(default_factory=list)
    smoke_request_seconds: float = 0.0
    # The stage results so far (the director's document["stages"]), for the stages that summarise.
    stages: result.Stages = field(default_factory=lambda: result.Stages())
    # Whether a stage of this run serves (throughput): its servers then start after the gate, while the offline
    # stages measure, and wait in `early` for it.
    serves: bool = False
    early: serving.Spawned | None = None
    # The smoke tier's engine-feature servers, started once the throughput stage has timed everything (CPU).
    smoke_early: serving.Spawned | None = None
    smoke_known: dict[str, result.SmokeFeature] | None = None  # the engine features refused on an earlier run
    starts: list[audit.Start] = field(default_factory=list)  # every engine and server this run started (audit.counting)

    @classmethod
    def for_spec(cls, spec: RunSpec) -> Workbench:
        return cls(spec=spec, suite=load_suite(spec.plan.workloads, spec.run_id))

    def stop_early(self) -> None:
        """Stop servers started for a stage that will not run now (an earlier one failed)."""
        started, self.early, self.smoke_early = (self.early, self.smoke_early), None, None
        for early in started:
            if early is not None:
                early.stop()

    def by_category(self) -> dict[str, list[list[int]]]:
        """The prompts category by category, in suite order: how the offline engines take them, one batch each, and
        so the order their per-prompt counters come in."""
        found: dict[str, list[list[int]]] = {}
        for prompt, category in zip(self.prompts, self.categories, strict=True):
            found.setdefault(category, []).append(prompt)
        return found

    def config(self, speculative: bool, k: int | None = None) -> EngineConfig:
        """The engine's configuration: the verifier alone, or with the pair's draft (drafting `k` tokens a step
        instead of the pair's own k, where given)."""
        plan = self.spec.plan
        drafting = (
            self.engine_config if k is None or self.engine_config is None else {**self.engine_config, "num_speculative_tokens": k}
        )
        return EngineConfig(
            verifier=str(self.paths["verifier"]),
            speculative_config=drafting if speculative else None,
            dtype=plan.dtype,
            max_model_len=plan.max_model_len,
            seed=plan.seed,
            enforce_eager=plan.enforce_eager,
        )


def measured(bench: Workbench) -> tuple[Measured, Measured]:
    """Return the baseline's and the speculative engine's raw data, which the earlier stages left."""
    assert bench.baseline is not None and bench.speculative is not None, "baseline and speculative run first"
    return bench.baseline, bench.speculative


def counters_of(measured: Counted, category: str) -> SpecCounters:
    return as_counters(measured["counters"][category])


def as_counters(raw: RawCounters) -> SpecCounters:
    return SpecCounters(raw["drafts"], raw["draft_tokens"], raw["accepted"], tuple(raw["per_position"]))


def total_counters(engine: Counted) -> SpecCounters:
    total = SpecCounters()
    for category in engine["counters"]:
        total = total + counters_of(engine, category)
    return total


def without_local_paths(value: T, bench: Workbench) -> T:
    """`value` with this worker's local paths replaced by what a reader can use: each snapshot folder by the repo
    and revision it holds, the interpreter by `python`. Documents are public; a worker's disk layout is not."""
    spec = bench.spec
    names = {sys.executable: "python", str(bench.paths.get("verifier", "")): f"{spec.verifier.repo_id}@{spec.verifier.sha}"}
    if spec.draft and "draft" in bench.paths:
        names[str(bench.paths["draft"])] = f"{spec.draft.repo_id}@{spec.draft.sha}"
    return cast(T, _replaced(value, {path: name for path, name in names.items() if path}))


def _replaced(value: object, names: dict[str, str]) -> object:
    if isinstance(value, str):
        for path, name in names.items():
            value = value.replace(path, name)
        return value
    if isinstance(value, dict):
        return {key: _replaced(item, names) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_replaced(item, names) for item in value]
    return value
