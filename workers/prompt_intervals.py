"""Intervals over prompts: the population a run's prompts were drawn from, not the drafting steps within them.

A prompt's drafting steps are not independent of one another (acceptance varies more between prompts than between
the steps of one), so every acceptance figure with an interval (AL, and each position's rate since issue 56) takes
prompts as its units: a ratio estimator Σcounts/Σdrafts with its jackknife error over prompts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from kernel.stats import t_quantile
from workers.engines.base import SpecCounters

# Fewer prompts than this get no AL interval: simulated, the ratio estimator's t interval held the true AL 0.93
# of the time at 8 heterogeneous prompts, a bootstrap over them only 0.86 (0.77 at 4).
MIN_PROMPTS_FOR_INTERVAL = 8
# Nor do prompts that weigh as fewer than this (Kish's effective number, from each prompt's drafting steps): where a
# few long prompts carry the ratio, its t on a third of that number has 1 degree of freedom, an interval many ALs wide.
MIN_EFFECTIVE_PROMPTS = 6.0


def effective_prompts(drafts: Sequence[int]) -> float:
    """How many equally weighted prompts the ratio's prompts are worth (Kish: (Σd)² / Σd²)."""
    return sum(drafts) ** 2 / sum(d * d for d in drafts)


def acceptance_interval(drafts: Sequence[int], accepted: Sequence[int]) -> tuple[float, float] | None:
    """The 95 % interval of AL = 1 + Σaccepted/Σdrafts over the prompts' population (ratio_interval)."""
    found = ratio_interval(drafts, accepted)
    return None if found is None else (1 + found[0], 1 + found[1])


def position_intervals(counters: SpecCounters, prompts: Sequence[SpecCounters] | None) -> list[list[float]]:
    """Each cumulative per-position rate's 95 % interval over the prompts' population, as AL's (issue 56 §2); empty
    where the prompts cannot carry one (too few, or no per-request counters)."""
    if not prompts or not counters.drafts:
        return []
    drafts = [p.drafts for p in prompts]
    found = [ratio_interval(drafts, [_at(p, i) for p in prompts]) for i in range(len(counters.per_position))]
    return [] if any(f is None for f in found) else [[low, min(1.0, high)] for low, high in filter(None, found)]


def _at(prompt: SpecCounters, position: int) -> int:
    return prompt.per_position[position] if position < len(prompt.per_position) else 0


def ratio_interval(drafts: Sequence[int], counts: Sequence[int]) -> tuple[float, float] | None:
    """The 95 % interval of Σcounts/Σdrafts (accepted tokens per drafting step, or the steps reaching a position) over
    the prompts' population, None below the minimum number of prompts or of effective prompts.

    Prompts, not drafting steps, are the independent units: AL varies more between prompts than between the
    steps of one. The ratio's jackknife standard error, on the log scale, with Student t on a third of the prompts'
    effective number (Kish: (Σd)² / Σd²). Long prompts weigh more, and with lognormal output lengths tied to
    acceptance the linearised t interval on n - 1 held the truth only 0.85-0.90 of the time at 8 prompts. On the
    effective number less one the jackknife held it 0.929-0.939 at 28-64 prompts where acceptance is low; the misses
    lay above, where a few long, well-accepted prompts carry the ratio and its spread is read short. A third of the
    effective number (a small-sample correction chosen by simulation, issue 39 §6; half still held 0.936) holds it
    0.942-0.997 wherever it is published, at 7-23 % more width at 28-64 prompts (docs/measuring.md,
    tests/workers/test_acceptance_interval.py).
    """
    n = len(drafts)
    total = sum(drafts)
    effective = effective_prompts(drafts) if total else 0.0
    if n < MIN_PROMPTS_FOR_INTERVAL or effective < MIN_EFFECTIVE_PROMPTS:
        return None
    ratio = sum(counts) / total
    if ratio == 0 or total == max(drafts):  # nothing counted, or one prompt drafted alone: no spread to read
        return ratio, ratio
    spread = _jackknife_error(drafts, counts) / ratio
    t = t_quantile(0.975, max(1, math.floor(effective / 3)))
    return ratio * math.exp(-t * spread), ratio * math.exp(t * spread)


def _jackknife_error(drafts: Sequence[int], accepted: Sequence[int]) -> float:
    """The standard error of Σaccepted/Σdrafts from the ratios with each prompt left out in turn."""
    n, total, taken = len(drafts), sum(drafts), sum(accepted)
    left_out = [(taken - a) / (total - d) for a, d in zip(accepted, drafts, strict=True) if total > d]
    centre = statistics.fmean(left_out)
    return math.sqrt((n - 1) / n * sum((r - centre) ** 2 for r in left_out))
