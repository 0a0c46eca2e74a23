"""Intervals over prompts: the population a run's prompts were drawn from, not the drafting steps within them.

A prompt's drafting steps are not independent of one another (acceptance varies more between prompts than between
the steps of one), so every acceptance figure with an interval (AL, and each position's rate since issue 56) takes
prompts as its units: a ratio estimator Σcounts/Σdrafts with its jackknife error over prompts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kernel.stats import t_quantile
from workers.engines.base import SpecCounters

Matrix = npt.NDArray[np.float64]

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
    the prompts' population, None below the minimum number of prompts or of effective prompts (ratio_intervals)."""
    low, high = ratio_intervals(np.asarray([drafts], dtype=np.float64), np.asarray([counts], dtype=np.float64))
    return None if math.isnan(low[0]) else (float(low[0]), float(high[0]))


# The skew term's weight, and its cap (the skewed side's t at most doubled): chosen by simulation (issue 56 §3), where Hall's
# plain term (weight 1) still held AL 0.943-0.952 in the hardest cells (acceptance Beta(2, 6), tie 0.9, 64-256 prompts).
SKEW_WEIGHT = 1.5


def ratio_intervals(drafts: Matrix, counts: Matrix) -> tuple[Matrix, Matrix]:
    """ratio_interval for each row of `drafts` and `counts` (one certification's prompts a row): the low and high ends,
    NaN where none is published. The simulations in tests/workers/test_acceptance_ties.py call it on thousands.

    Prompts, not drafting steps, are the independent units: AL varies more between prompts than between the
    steps of one. The ratio's jackknife standard error, on the log scale, with Student t on a third of the prompts'
    effective number (Kish: (Σd)² / Σd²). Long prompts weigh more, and with lognormal output lengths tied to
    acceptance the linearised t interval on n - 1 held the truth only 0.85-0.90 of the time at 8 prompts; a third of
    the effective number (issue 39 §6) held it 0.942-0.997 at 28-64 prompts with a tie of about 0.5.

    With the ratio tied harder to length (log sd 1, a correlation of 0.7-0.9 between log length and acceptance), that
    interval held AL only 0.91-0.94 at 28-256 prompts, and its misses were one-sided: under the truth 5-9 % of the time.
    A sample that missed the few long, well-accepted prompts reads both the ratio and its spread short. The upper end
    therefore adds Hall's (1992) Edgeworth term for a skewed mean, weighted by SKEW_WEIGHT: skew (2t² + 1) / (6 sqrt(n)),
    with skew that of the prompts' jackknife influence (right skew only: it never narrows). Simulated
    (issue 56 §3), it holds 0.957-0.980 there at 9-60 % more width; the low end, which the live rule reads, is unchanged.
    """
    rows, n = drafts.shape
    low, high = np.full(rows, math.nan), np.full(rows, math.nan)
    if n < MIN_PROMPTS_FOR_INTERVAL:
        return low, high
    total, taken = drafts.sum(axis=1), counts.sum(axis=1)
    squares = (drafts * drafts).sum(axis=1)
    effective = np.divide(total * total, squares, out=np.zeros(rows), where=squares > 0)
    ratio = np.divide(taken, total, out=np.zeros(rows), where=total > 0)
    published = effective >= MIN_EFFECTIVE_PROMPTS  # so no prompt drafts alone: every left-out ratio is defined
    point = published & (ratio == 0)  # nothing counted: no spread to read, the interval is the point
    live = published & ~point
    spread, skew = _spread(_influence(drafts[live], counts[live]), ratio[live])
    t = _t_975(np.maximum(1, np.floor(effective[live] / 3)))
    spread /= ratio[live]
    low[live], high[live] = ratio[live] * np.exp(-t * spread), ratio[live] * np.exp((t + _skew_term(skew, t, n)) * spread)
    low[point], high[point] = ratio[point], ratio[point]
    return low, high


def _influence(drafts: Matrix, counts: Matrix) -> Matrix:
    """Each prompt's jackknife influence on its row's Σcounts/Σdrafts: the left-out ratios' deviations, sign flipped
    (a prompt that raises the ratio has a positive influence)."""
    total, taken = drafts.sum(axis=1, keepdims=True), counts.sum(axis=1, keepdims=True)
    left_out: Matrix = (taken - counts) / (total - drafts)
    centre: Matrix = left_out.mean(axis=1, keepdims=True)
    return centre - left_out


def _spread(influence: Matrix, scale: Matrix) -> tuple[Matrix, Matrix]:
    """Each row's jackknife standard error, and the skewness of its prompts' influence; `scale`, the size of what was
    estimated, tells rounding from spread."""
    n = influence.shape[1]
    second, third = (influence**2).mean(axis=1), (influence**3).mean(axis=1)
    # Prompts that all read alike leave rounding alone: no spread, so no skew to read either.
    steady = second <= 1e-24 * scale**2
    skew = np.divide(third, second**1.5, out=np.zeros(len(second)), where=~steady)
    return np.where(steady, 0.0, np.sqrt((n - 1) * second)), skew


def _skew_term(skew: Matrix, t: Matrix, n: int) -> Matrix:
    """What the end on the skewed side adds to t (Hall's term, right skew only: it never narrows), at most t again."""
    return np.minimum(SKEW_WEIGHT * np.maximum(0.0, skew) * (2 * t * t + 1) / (6 * math.sqrt(n)), t)


@functools.lru_cache(maxsize=512)
def _t_975_at(dof: int) -> float:
    return t_quantile(0.975, dof)


def _t_975(dofs: Matrix) -> Matrix:
    return np.array([_t_975_at(int(d)) for d in dofs], dtype=np.float64)


def difference_interval(
    drafts: tuple[Sequence[int], Sequence[int]], accepted: tuple[Sequence[int], Sequence[int]]
) -> tuple[float, float] | None:
    """The 95 % interval of AL_a - AL_b where both were measured on the same prompts (a's i-th prompt is b's): paired
    per prompt, the difference's jackknife over prompts (each prompt left out of both at once), with Student t on a
    third of the smaller effective number, as `ratio_interval`; None where either side could carry no interval of its
    own. A prompt that helps one mode helps the other too, so pairing takes that out of the spread.

    The end on the side the prompts' influence is skewed to gets ratio_intervals' skew term: with lengths tied hard to
    acceptance (tie 0.7-0.9, log sd 1) the symmetric interval held the difference only 0.91-0.94 of the time at
    28-256 prompts, its misses on that side (tests/workers/test_acceptance_ties.py)."""
    n = len(drafts[0])
    if n != len(drafts[1]) or any(ratio_interval(d, a) is None for d, a in zip(drafts, accepted, strict=True)):
        return None
    sides = [np.asarray([values], dtype=np.float64) for values in (*drafts, *accepted)]
    ratios = [float(sides[2].sum() / sides[0].sum()), float(sides[3].sum() / sides[1].sum())]
    influence = _influence(sides[0], sides[2]) - _influence(sides[1], sides[3])
    error, skew = _spread(influence, np.array([max(ratios)]))
    dof = max(1, math.floor(min(effective_prompts(d) for d in drafts) / 3))
    t = np.array([_t_975_at(dof)])
    low, high = t + _skew_term(-skew, t, n), t + _skew_term(skew, t, n)
    centre = ratios[0] - ratios[1]
    return centre - float(low[0] * error[0]), centre + float(high[0] * error[0])
