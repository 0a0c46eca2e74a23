"""Writes for regressions: compare a finished certification with the previous one of its lineage."""

from __future__ import annotations

from django.conf import settings

from registry.models import CertificationRun, Regression
from registry.selectors import HEADLINE_METRICS, previous_lineage_run, run_headline


def run_regressions_record(*, run: CertificationRun) -> list[Regression]:
    """Store a Regression for each headline figure that fell beyond the tolerance, and flag the pair.

    A run with no earlier certification of its lineage (or without the figure) has nothing to
    regress from; a clean run clears the pair's flag.
    """
    previous = previous_lineage_run(run=run)
    if previous is None:
        return _flag(run, [])
    found = [
        Regression.objects.create(pair=run.pair, run=run, previous_run=previous, metric=metric, previous=old, current=new,
                                  relative_change=(new - old) / old)
        for metric, (old, new) in _drops(previous, run).items()
    ]  # fmt: skip
    return _flag(run, found)


def _flag(run: CertificationRun, found: list[Regression]) -> list[Regression]:
    run.pair.regressed = bool(found)
    run.pair.save(update_fields=["regressed"])
    return found


def _drops(previous: CertificationRun, run: CertificationRun) -> dict[str, tuple[float, float]]:
    """Return {metric: (before, now)} for each headline figure that fell by more than the tolerance."""
    before, now = run_headline(run=previous), run_headline(run=run)
    drops = {}
    for metric in HEADLINE_METRICS:
        old, new = before[metric], now[metric]
        if old is not None and new is not None and old > 0 and (new - old) / old < -settings.SPECHUB_REGRESSION_RTOL:
            drops[metric] = (old, new)
    return drops
