"""Small interval arithmetic both sides share: Student t's quantile and the ratio between two runs' speeds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Student t's 97.5th percentile by degrees of freedom: the engines' environment has no scipy,
# and a fixed table of 30 values is all a paired-blocks interval needs (1.96 beyond).
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t_975(dof: int) -> float:
    return T_975[dof - 1] if dof <= len(T_975) else 1.96


def ratio_between(before: Sequence[float], after: Sequence[float]) -> tuple[float, float, float] | None:
    """Return after's speedup over before's, from each run's paired block ratios, with its 95 % interval.

    Welch's t on the two runs' log ratios (their spreads may differ), its degrees of freedom rounded down
    (a wider interval). None when either run has fewer than two ratios: no spread, no interval.
    """
    if len(before) < 2 or len(after) < 2:
        return None
    logs = [[math.log(r) for r in run] for run in (before, after)]
    shares = [statistics.variance(run) / len(run) for run in logs]
    error = math.sqrt(sum(shares))
    centre = statistics.fmean(logs[1]) - statistics.fmean(logs[0])
    if error == 0:
        return math.exp(centre), math.exp(centre), math.exp(centre)
    dof = error**4 / sum(share**2 / (len(run) - 1) for share, run in zip(shares, logs, strict=True))
    half = t_975(max(1, math.floor(dof))) * error
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)
