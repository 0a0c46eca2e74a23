"""Writes for regressions: compare a finished certification with the previous one of its lineage."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from kernel import result
from kernel.stats import ratio_between
from registry.models import CertificationRun, Regression
from registry.selectors import previous_lineage_run, run_document, run_headline


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
    below 1 less the tolerance, which keeps false flags of an unchanged pair under 2.5 %.
    """
    before, now = run_headline(run=previous), run_headline(run=run)
    floor = 1 - settings.SPECHUB_REGRESSION_RTOL
    drops = {}
    old_al, new_al = before["mean_acceptance_length"], now["mean_acceptance_length"]
    if old_al and new_al is not None and new_al / old_al < floor:
        drops["mean_acceptance_length"] = Drop(old_al, new_al, new_al / old_al - 1, [])
    compared = ratio_between(*(result.block_ratios(run_document(r)) for r in (previous, run)))
    old, new = before["speedup"], now["speedup"]
    if compared is not None and old is not None and new is not None and compared[2] < floor:
        drops["speedup"] = Drop(old, new, compared[0] - 1, [compared[1], compared[2]])
    return drops
