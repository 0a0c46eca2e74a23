"""What a certification costs before it runs: `python -m workers certify --dry-run --hardware h100`.

A stated cost model, not a measurement. Each hardware class has its figures (`Costs`): the CPU
class's were measured on the 2-core CI machine with the toy zoo (issue 24's `make demo` and
`make bench`); the H100's are for an 8B verifier with an EAGLE-3 head, from open figures: 133
tok/s at batch 1 for the verifier alone on one H100, and server start-up, engine load and
qualification times as vLLM users report them for 8B models. The throughput stage is costed
from the plan: per level, the pairs Stein's rule is expected to take at the class's typical
block-to-block spread, each pair two blocks of `max(2c, 8)` requests plus the quiet gap before each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernel import result
from kernel.spec import Plan
from workers import metrics


@dataclass(frozen=True)
class Costs:
    """One hardware class's cost figures (seconds unless named otherwise)."""

    name: str
    source: str
    qualification: float  # the engine controls, once per engine build and hardware class
    offline: float  # fetch, gate, the offline stages (on the servers, or their engines' starts too) and equivalence
    server_start: float  # both servers, started side by side: each one's seconds until it answers
    smoke: float  # the smoke tier's engine features (each serves the pair once more)
    baseline_tokens_per_second: float  # one request's decode rate, the verifier alone
    spread: float  # the typical CV of a paired block ratio
    gpus: int
    engine_start: float  # one offline vLLM engine, until it answers (part of `offline`)
    reference_start: float  # the reference engine (transformers), until it answers (part of `offline`)


# One offline vLLM engine, one server and the reference engine on the CPU class, until each answers: the documents' own
# lists. Engines: the preload A/B's 11 quiet runs (docs/measuring.md, "Preloaded libraries"; a 2-core Intel Xeon),
# 28-37 s. Servers and the reference engine: issue 62 §3's three served runs (a quiet 2-core AMD EPYC, the offline
# stages measuring on the servers): the published two 32-42 s, the smoke tier's 58-74 s, their means 47-56 s; the
# reference engine 1.0-1.1 s. The offline stages, fetch to the throughput stage less the servers' start: 28-29 s.
ENGINE_START_CPU = 32.0
SERVER_START_CPU = 52.0
REFERENCE_START_CPU = 1.0
OFFLINE_CPU = 29.0

COSTS = {
    "cpu": Costs("cpu", "as measured on the 2-core CI machine with the toy zoo (issue 24's `make demo` and bench, cold caches)",
                 qualification=178, offline=OFFLINE_CPU, server_start=SERVER_START_CPU, smoke=64, baseline_tokens_per_second=195,
                 spread=0.17, gpus=0, engine_start=ENGINE_START_CPU, reference_start=REFERENCE_START_CPU),
    "h100": Costs("h100", "an 8B verifier in bf16 with an EAGLE-3 head on one H100 80 GB, from open figures", qualification=900,
                  offline=240, server_start=120, smoke=300, baseline_tokens_per_second=133, spread=0.03, gpus=1,
                  engine_start=90, reference_start=60),
}  # fmt: skip


def served(costs: Costs) -> bool:
    """Whether the published servers give the offline stages' figures (workers/served.py): where they start after the
    gate, beside the reference engine (CPU). One GPU holds the offline engines first, then the servers."""
    return not costs.gpus


def planned_starts(plan: Plan, hardware: str) -> list[result.Start]:
    """The engines and servers a certification on `plan` starts, in the shape its document lists them (workers/audit.py),
    each at the class's figure: the offline engines (one GPU only) and the reference engine, the two published servers
    (the gate starts them), and the smoke tier's pair with its engine features' flags. A level whose best k differs from
    the run's, or a batch-size schedule measured better, serves one more each: those depend on the figures, unplanned."""
    costs = costs_for(hardware)
    starts: list[result.Start] = [] if served(costs) else [
        {"kind": "engine", "detail": "the verifier alone", "stage": "baseline", "seconds": costs.engine_start},
        {"kind": "engine", "detail": "the pair", "stage": "speculative", "seconds": costs.engine_start},
    ]  # fmt: skip
    if plan.reference_check:
        starts.append(
            {"kind": "reference", "detail": "the verifier alone", "stage": "equivalence", "seconds": costs.reference_start}
        )
    sides = ("baseline", "speculative")
    starts += [{"kind": "server", "detail": side, "stage": "gate", "seconds": costs.server_start} for side in sides]
    if plan.smoke_engine_features is None or plan.smoke_engine_features:
        starts += [{"kind": "server", "detail": f"{side} with the smoke tier's engine features", "stage": "throughput",
                    "seconds": costs.server_start} for side in sides]  # fmt: skip
    return starts


@dataclass(frozen=True)
class LevelCost:
    concurrency: int | None  # None: the Poisson point
    pairs: int
    seconds: float


@dataclass(frozen=True)
class Estimate:
    costs: Costs
    levels: list[LevelCost]
    wall_seconds: float  # one pair's certification, qualification excluded

    @property
    def gpu_minutes(self) -> float:
        return self.wall_seconds * self.costs.gpus / 60


def costs_for(hardware: str) -> Costs:
    """The cost figures of `hardware` ("cpu", "h100" or "gpu.h100")."""
    name = hardware.removeprefix("gpu.")
    if name not in COSTS:
        raise ValueError(f"No cost model for hardware {hardware!r}; known: {', '.join(COSTS)}.")
    return COSTS[name]


def expected_pairs(plan: Plan, spread: float, *, lowest: bool) -> int:
    """The pairs Stein's rule takes when the first stage's spread is the typical one."""
    rule = metrics.Stein(first=plan.repeats, most=plan.most_pairs, target=plan.half_width if lowest else plan.half_width_loaded)
    return rule.total([math.exp(spread * z) for z in _unit_spread(plan.repeats)])


def _unit_spread(count: int) -> list[float]:
    """`count` values whose sample standard deviation is exactly 1."""
    raw = [index - (count - 1) / 2 for index in range(count)]
    scale = math.sqrt(sum(x * x for x in raw) / (count - 1))
    return [x / scale for x in raw]


def estimate(plan: Plan, hardware: str) -> Estimate:
    costs = costs_for(hardware)
    levels = []
    for number, concurrency in enumerate([*plan.concurrency, None]):
        pairs = expected_pairs(plan, costs.spread, lowest=number == 0)
        at = concurrency or 1
        requests = max(2 * at, 8)
        block = math.ceil(requests / at) * plan.output_tokens / costs.baseline_tokens_per_second
        levels.append(LevelCost(concurrency, pairs, pairs * 2 * block))  # no pause: the other server is stopped
    # The offline stages measure on the published servers once they answer (CPU), or before them (one GPU).
    starting = costs.offline + costs.server_start
    wall = starting + costs.smoke + sum(level.seconds for level in levels)
    return Estimate(costs, levels, wall)


def starts_line(starts: list[result.Start]) -> str:
    """The planned starts, counted by kind with each one's seconds, as the dry run prints them."""
    kinds = {"engine": "offline vLLM engine", "reference": "reference engine", "server": "vLLM server"}
    parts = []
    for kind, name in kinds.items():
        seconds = [start["seconds"] or 0.0 for start in starts if start["kind"] == kind]
        if seconds:
            each = " each" if len(seconds) > 1 else ""
            shown = f"{seconds[0]:.0f}" if seconds[0] >= 1 else f"{seconds[0]:.1f}"
            parts.append(f"{len(seconds)} {name}{'s' if len(seconds) > 1 else ''} ({shown} s{each})")
    return f"starts, as a run's document lists them: {', '.join(parts)}"


def describe(plan: Plan, hardware: str) -> list[str]:
    """The dry run's lines: the plan, each level's expected pairs and time, the totals and the assumptions."""
    found = estimate(plan, hardware)
    costs = found.costs
    lines = [
        f"plan on {costs.name}: levels {', '.join(map(str, plan.concurrency))} and a Poisson point; "
        f"{plan.repeats} pairs first, at most {plan.most_pairs}; 95 % half-width ±{plan.half_width:.0%} at "
        f"c={plan.concurrency[0]}, ±{plan.half_width_loaded:.0%} elsewhere; {plan.output_tokens} tokens a request",
        f"  {'level':<10}{'pairs':>6}{'seconds':>9}",
    ]
    lines += [f"  {'c=' + str(lc.concurrency) if lc.concurrency else 'Poisson':<10}{lc.pairs:>6}{lc.seconds:>9.0f}"
              for lc in found.levels]  # fmt: skip
    lines += [
        f"  offline stages {costs.offline:.0f} s, two servers' start {costs.server_start:.0f} s"
        + (" (after them: one GPU)" if costs.gpus else " (first: the offline stages measure on them)")
        + f", smoke tier {costs.smoke:.0f} s",
        starts_line(planned_starts(plan, hardware)),
        f"estimate: {found.wall_seconds / 60:.1f} min a pair"
        + (f", {found.gpu_minutes:.1f} GPU-minutes" if costs.gpus else " (no GPU)")
        + f"; qualification once per engine build: {costs.qualification / 60:.1f} min",
        f"assumptions: {costs.source}; a paired block ratio's CV {costs.spread:.0%}; "
        f"{costs.baseline_tokens_per_second:.0f} tok/s a request for the verifier alone (the pair is costed at that rate too)",
    ]
    return lines
