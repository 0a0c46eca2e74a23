"""The measured schedule, served (issue 40 §1): vLLM's Dynamic SD (`num_speculative_tokens_per_batch_size`) composed
from the best k measured at each level (kernel/schedule.py), on a server of its own beside the same baseline, timed
in paired blocks at every level like any speed figure, and checked from its served counters.

Honoured means: at each level, the tokens drafted per drafting step lie within the ks the schedule gives the batch
sizes that level runs (1 up to its concurrency; steps at k = 0 draft nothing and count no step), and at concurrency 1
equal the k of batch 1 exactly (none drafted where that k is 0). An engine that takes the option and drafts otherwise
is a finding of the engine build: "schedule not honoured", with the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from kernel import result, schedule
from kernel.builds import installed_engine_build
from kernel.result import SLOWER, speed_label
from kernel.schedule import AtLevel, Range
from workers import serving
from workers.engines.base import Engine, EngineConfig, SpecCounters

Timed = Callable[[Mapping[str, serving.Server], int], result.Level]
SLACK = 0.02  # the tokens per step vLLM trims near a request's end


def composed(levels: Mapping[str, result.Level], chosen: Mapping[str, result.BestK], run_k: int) -> list[Range]:
    """The schedule from the k measured best at each level (the predicted best, or the run's where that measured
    faster), k = 0 where even that is measurably slower; empty where it would be one k everywhere, which the run
    measured already."""
    at = []
    for level, best in chosen.items():
        timed = {run_k: levels.get(level), best["best_k"]: best.get("measured") or levels.get(level)}
        k, figures = max(((k, f) for k, f in timed.items() if f), key=lambda kf: kf[1]["speedup"], default=(run_k, None))
        slower = speed_label(figures["speedup_interval"] if figures else None) == SLOWER
        at.append(AtLevel(int(level), k, slower))
    ranges = schedule.compose(at)
    return ranges if len({r.k for r in ranges}) > 1 else []


def serve(
    engine: Engine, config: EngineConfig, ranges: list[Range], baseline: serving.Server, levels: list[int], timed: Timed
) -> dict[str, result.ScheduleLevel]:
    """Serve the schedule beside `baseline`, time every level, and say from the counters whether each honours it."""
    written = schedule.speculative_config(dict(config.speculative_config or {}), ranges, installed_engine_build("vllm"))
    scheduled = replace(config, speculative_config=written)  # in the form the installed build reads
    figures: dict[str, result.ScheduleLevel] = {}
    with serving.servers(engine, {"speculative-schedule": scheduled}) as extra:
        server = extra["speculative-schedule"]
        for level in levels:
            before = serving.served_counters(server)
            measured = timed({"baseline": baseline, "speculative": server}, level)
            figures[str(level)] = {**measured, **honoured_at(ranges, level, serving.served_counters(server) - before)}
    return figures


def outcome(
    ranges: list[Range], figures: dict[str, result.ScheduleLevel], fixed: Mapping[str, result.Level], run_k: int, recipe: str
) -> result.ServedSchedule:
    """The served schedule as the result document holds it: honoured or the finding, and whether to serve it."""
    broken = [f"c={level}: {row['drafting']}" for level, row in figures.items() if not row["honoured"]]
    served: result.ServedSchedule = {
        "ranges": [list(r) for r in ranges], "levels": figures, "honoured": not broken,
        "finding": f"schedule not honoured: {'; '.join(broken)}" if broken else None, "recipe": recipe,
        "serve_it": False, "why": "",
    }  # fmt: skip
    served["serve_it"], served["why"] = judged(served, fixed, run_k)
    return served


def honoured_at(ranges: list[Range], concurrency: int, counted: SpecCounters) -> result.ScheduleDrafting:
    """Whether a level's drafting follows the schedule, and what it drafted."""
    ks = {schedule.k_at(ranges, batch) for batch in range(1, concurrency + 1)}
    drafting = sorted(k for k in ks if k)
    per_step = counted.draft_tokens / counted.drafts if counted.drafts else 0.0
    if not drafting:
        ok = counted.drafts == 0
    elif not counted.drafts:  # nothing drafted is the schedule's only where the level's full batch drafts nothing:
        ok = schedule.k_at(ranges, concurrency) == 0  # requests that start and end together leave no smaller batch
    elif concurrency == 1:
        ok = abs(per_step - drafting[0]) <= SLACK * drafting[0]
    else:
        ok = drafting[0] * (1 - SLACK) <= per_step <= drafting[-1]
    told = f"{counted.drafts} drafting steps, {per_step:.2f} tokens a step, where the schedule says k "
    told += f"{'/'.join(map(str, sorted(ks)))} for batches 1-{concurrency}"
    return {"honoured": ok, "drafted_per_step": round(per_step, 3), "drafting": told}


def not_served(ranges: list[Range], run_k: int, recipe: str, error: str) -> result.ServedSchedule:
    """The schedule the engine would not start with: a finding of the build, and the fixed k stays."""
    return {"ranges": [list(r) for r in ranges], "levels": {}, "honoured": False, "recipe": recipe, "serve_it": False,
            "finding": f"schedule not served: the engine would not start with it ({error})",
            "why": f"the fixed k={run_k} stays: the engine would not start with the schedule"}  # fmt: skip


def judged(served: result.ServedSchedule, fixed: Mapping[str, result.Level], run_k: int) -> tuple[bool, str]:
    """Whether the schedule is the command to serve: honoured, measured faster than the fixed k at some level (its
    interval wholly above the fixed k's) and slower at none (wholly below); and why, in words."""
    if not served["honoured"]:
        return False, f"the fixed k={run_k} stays: this engine build does not honour the schedule"
    above, below = [], []
    for level, timed in served["levels"].items():
        mine = timed["speedup_interval"]
        theirs = fixed[level]["speedup_interval"] if level in fixed else None
        if mine and theirs:
            above += [level] if mine[0] > theirs[1] else []
            below += [level] if mine[1] < theirs[0] else []
    if below:
        return False, f"the fixed k={run_k} stays: the schedule was measured slower than it at c={', c='.join(below)}"
    if not above:
        return False, f"the fixed k={run_k} stays: the schedule was not measured faster than it at any level"
    return True, f"the schedule: measured faster than the fixed k={run_k} at c={', c='.join(above)} and slower at none"
