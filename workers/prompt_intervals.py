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

from kernel.quantized import MIN_EFFECTIVE_PROMPTS, MIN_PROMPTS
from kernel.stats import t_quantile
from workers.engines.base import SpecCounters

Matrix = npt.NDArray[np.float64]

# Fewer prompts than this get no AL interval: simulated, the ratio estimator's t interval held the true AL 0.93
# of the time at 8 heterogeneous prompts, a bootstrap over them only 0.86 (0.77 at 4). With the long prompts the poorly
# accepted (issue 63 §4) it held 0.83-0.88 at 8 (5-9 % of such certifications published one), and holds 0.954 from 12:
# the published minimum since. Nor do prompts that weigh as fewer than MIN_EFFECTIVE_PROMPTS (Kish's effective
# number, from each prompt's drafting steps): where a few long prompts carry the ratio, its t on a third of that number
# has 1 degree of freedom, an interval many ALs wide. Both live in kernel/quantized.py, which the registry's pages and
# the quantized comparison read too.
MIN_PROMPTS_FOR_INTERVAL = MIN_PROMPTS


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


# The skew term's weights, and its cap (the skewed side's t at most doubled), chosen by simulation. The ratio's interval is
# on the log scale, which already stretches its upper end and pulls its low end in, so the upper end's term weighs less:
# 1.5 (issue 56 §3, where Hall's plain weight of 1 still held AL 0.943-0.952 in the hardest cells: acceptance Beta(2, 6),
# tie 0.9, 64-256 prompts). The low end, and either end of a paired difference (on its own scale), weigh 3 (issue 63 §4:
# at 1.5, with the long prompts the poorly accepted, position 1's rate held 0.932-0.941 at 32-128 prompts, and the
# paired change 0.933-0.934 at 16-64; at 2.5, 0.950 and 0.946; at 3, 0.952 and 0.950, at 0-5 % more width than 2.5).
SKEW_WEIGHT = 1.5
PLAIN_SKEW_WEIGHT = 3.0


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
    (issue 56 §3), it holds 0.957-0.980 there at 9-60 % more width.

    Where the long prompts are the poorly accepted ones (a tie of -0.4 to -0.7), or acceptance is high, so that a
    position's rate crowds its ceiling, the influence leans the other way and the misses were above the truth: AL
    held 0.90-0.93 at 16-256 prompts, position 1's rate 0.87-0.91 (issue 63 §4). The low end therefore takes the same
    term for left skew, weighted by PLAIN_SKEW_WEIGHT: 0.96-0.98 there, 1.04-1.43 times as wide, and at least 0.953
    with ties from -0.7 to 0.9 at low and high acceptance (tests/workers/test_skew_either_way.py).
    The low end is what live "below" and a file's judgement read: it only ever moves down, so they read "below" no
    more often than before.
    """
    rows, n = drafts.shape
    low, high = np.full(rows, math.nan), np.full(rows, math.nan)
    if n < MIN_PROMPTS_FOR_INTERVAL:
        return low, high
    total, taken = drafts.sum(axis=1), counts.sum(axis=1)
    effective = _effective(drafts)
    ratio = np.divide(taken, total, out=np.zeros(rows), where=total > 0)
    published = effective >= MIN_EFFECTIVE_PROMPTS  # so no prompt drafts alone: every left-out ratio is defined
    point = published & (ratio == 0)  # nothing counted: no spread to read, the interval is the point
    live = published & ~point
    spread, skew = _spread(_influence(drafts[live], counts[live]), ratio[live])
    t = _t_975(np.maximum(1, np.floor(effective[live] / 3)))
    spread /= ratio[live]
    below, above = t + _skew_term(-skew, t, n, PLAIN_SKEW_WEIGHT), t + _skew_term(skew, t, n, SKEW_WEIGHT)
    low[live], high[live] = ratio[live] * np.exp(-below * spread), ratio[live] * np.exp(above * spread)
    low[point], high[point] = ratio[point], ratio[point]
    return low, high


def _effective(drafts: Matrix) -> Matrix:
    """Each row's effective number of prompts (effective_prompts); 0 where nothing was drafted."""
    total, squares = drafts.sum(axis=1), (drafts * drafts).sum(axis=1)
    effective: Matrix = np.divide(total * total, squares, out=np.zeros(len(total)), where=squares > 0)
    return effective


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


def _skew_term(skew: Matrix, t: Matrix, n: int, weight: float) -> Matrix:
    """What the upper end adds to t for the influence's right skew (Hall's term; pass -skew for the low end), at most t
    again; nothing for skew the other way: it never narrows."""
    return np.minimum(weight * np.maximum(0.0, skew) * (2 * t * t + 1) / (6 * math.sqrt(n)), t)


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

    The end on the side the prompts' influence is skewed to gets ratio_intervals' skew term, weighted by
    PLAIN_SKEW_WEIGHT: with lengths tied hard to acceptance (tie 0.7-0.9, log sd 1) the symmetric interval held the
    difference only 0.91-0.94 of the time at 28-256 prompts, its misses on that side
    (tests/workers/test_acceptance_ties.py); at weight 1.5, still 0.933-0.934 at 16-64 prompts in the hardest cells,
    at 3 at least 0.955 from 12 prompts (tests/workers/test_skew_either_way.py)."""
    if len(drafts[0]) != len(drafts[1]):
        return None
    rows = [np.asarray([values], dtype=np.float64) for values in (*drafts, *accepted)]
    low, high = difference_intervals((rows[0], rows[2]), (rows[1], rows[3]))
    return None if math.isnan(low[0]) else (float(low[0]), float(high[0]))


def difference_intervals(first: tuple[Matrix, Matrix], second: tuple[Matrix, Matrix]) -> tuple[Matrix, Matrix]:
    """difference_interval for each row of two (drafts, counts) matrices, a prompt a column in both: the low and high
    ends, NaN where either side publishes no interval of its own. tests/workers/test_skew_either_way.py calls it on
    thousands of certifications at once."""
    (drafts_a, counts_a), (drafts_b, counts_b) = first, second
    rows, n = drafts_a.shape
    low, high = np.full(rows, math.nan), np.full(rows, math.nan)
    effective = np.minimum(_effective(drafts_a), _effective(drafts_b))
    live = (effective >= MIN_EFFECTIVE_PROMPTS) & (n >= MIN_PROMPTS_FOR_INTERVAL)
    ratio_a, ratio_b = (counts[live].sum(axis=1) / drafts[live].sum(axis=1) for drafts, counts in (first, second))
    influence = _influence(drafts_a[live], counts_a[live]) - _influence(drafts_b[live], counts_b[live])
    error, skew = _spread(influence, np.maximum(ratio_a, ratio_b))
    t = _t_975(np.maximum(1, np.floor(effective[live] / 3)))
    low[live] = ratio_a - ratio_b - (t + _skew_term(-skew, t, n, PLAIN_SKEW_WEIGHT)) * error
    high[live] = ratio_a - ratio_b + (t + _skew_term(skew, t, n, PLAIN_SKEW_WEIGHT)) * error
    return low, high
