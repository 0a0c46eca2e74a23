"""Writes for regressions: compare a finished certification with the previous one of its lineage."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from kernel import result
from kernel.stats import ratio_between, run_to_run_spread
from registry.models import CertificationRun, Regression
from registry.runs.selectors import lineage_block_ratios, previous_lineage_run, run_document, run_headline

# How far a pair's true speed moves from one run to the next (log spread), where its own history cannot say yet.
# Nothing has measured it on our machines: these are stated assumptions. A CPU run shares two cores among both
# engines, their front ends and the client, on hosts whose load and clocks differ, so it is taken as twice a GPU's,
# whose clocks and thermal state move less. The GPU floor holds a pair whose true spread is 6 % to at most 5 % false
# flags at every CV: as the runs' own spread vanishes the interval is the floor's alone, ±1.96 sqrt(2) floor, and the
# flag's rate tends to Φ(-(-ln 0.95 + 2.77 floor) / (sqrt(2) 6 %)): 5.65 % at 3 % (5.6-5.7 % at CV 0.5-1 %, issue 56
# §4), 4.63 % at 3.3 % (4.5-4.7 % simulated, tests/kernel/test_regression_floor.py). A larger floor costs power at
# real drops: a steady pair's true 15 % drop at CV 3 % is flagged 0.67 of the time at 3.3 %, 0.79 at 3 %.
RUN_TO_RUN_FLOOR_CPU = 0.06
RUN_TO_RUN_FLOOR_GPU = 0.033
# The earlier runs the history reads: old hosts and engine builds age out.
HISTORY_RUNS = 20


@dataclass(frozen=True)
class Drop:
    before: float
    now: float
    change: float  # now over before, less 1
    interval: list[float]  # of now over before, 95 %; empty where the figure has none


def run_regressions_record(*, run: CertificationRun) -> list[Regression]:
    """Store a Regression for each headline figure that fell beyond the tolerance, and flag the pair.

    A run with no earlier certification of its lineage (or without the figure) has nothing to
    regress from; a clean run clears the pair's flag.
    """
    previous = previous_lineage_run(run=run)
    if previous is None:
        return _flag(run, [])
    found = [
        Regression.objects.create(pair=run.pair, run=run, previous_run=previous, metric=metric, previous=drop.before,
                                  current=drop.now, relative_change=drop.change, interval=drop.interval)
        for metric, drop in _drops(previous, run).items()
    ]  # fmt: skip
    return _flag(run, found)


def _flag(run: CertificationRun, found: list[Regression]) -> list[Regression]:
    run.pair.regressed = bool(found)
    run.pair.save(update_fields=["regressed"])
    return found


def _drops(previous: CertificationRun, run: CertificationRun) -> dict[str, Drop]:
    """Return the headline figures that fell by more than the tolerance.

    AL is counted over the same prompts in both runs: its fall is the figure's. The speedup is timed,
    so a point estimate 5 % lower is noise a good part of the time (issue 25: 16 % of unchanged pairs at a
    CV of 8 %, 29 % at 15 %); it regresses only when the whole 95 % interval of now over before lies
    below 1 less the tolerance. That interval takes each run's Stein spread and the pair's run-to-run
    spread (issue 39: without it, 10 % of unchanged pairs were flagged at a true 6 % spread).
    """
    before, now = run_headline(run=previous), run_headline(run=run)
    floor = 1 - settings.SPECHUB_REGRESSION_RTOL
    drops = {}
    old_al, new_al = before["mean_acceptance_length"], now["mean_acceptance_length"]
    if old_al and new_al is not None and new_al / old_al < floor:
        drops["mean_acceptance_length"] = Drop(old_al, new_al, new_al / old_al - 1, [])
    (old_ratios, old_first), (new_ratios, new_first) = _timed(previous), _timed(run)
    compared = ratio_between(old_ratios, new_ratios, firsts=(old_first, new_first), drift=_run_to_run(run))
    old, new = before["speedup"], now["speedup"]
    if compared is not None and old is not None and new is not None and compared[2] < floor:
        drops["speedup"] = Drop(old, new, compared[0] - 1, [compared[1], compared[2]])
    return drops


def _timed(run: CertificationRun) -> tuple[list[float], int]:
    """Return a run's c=1 block ratios and its Stein first stage (all of them where its count was fixed)."""
    measured = result.throughput(document := run_document(run))
    figures = measured["levels"].get("1") if measured else None
    return result.block_ratios(document), (result.interval_dof(figures) + 1 if figures else 2)


def _run_to_run(run: CertificationRun) -> float:
    """Return the pair's run-to-run spread: its lineage's own where enough earlier runs tell, else the floor."""
    spread = run_to_run_spread(lineage_block_ratios(run=run, latest=HISTORY_RUNS))
    if spread is not None:
        return spread
    return RUN_TO_RUN_FLOOR_CPU if run.hardware == "cpu" else RUN_TO_RUN_FLOOR_GPU
