"""Small statistics both sides share: Student t's quantile, the ratio between two runs' speeds, and χ² tails and power
(the registry re-judges a stored sampling test's power with them)."""

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


def chi_square_sf(statistic: float, dof: int) -> float:
    """Return P(X ≥ statistic) for a chi-square variable with `dof` degrees of freedom."""
    if statistic <= 0:
        return 1.0
    return _gamma_q(dof / 2, statistic / 2)


def _gamma_q(a: float, x: float) -> float:
    """Regularised upper incomplete gamma Q(a, x), by series below a+1 and a continued fraction above."""
    log_prefix = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1 / a
        n = a
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1 - total * math.exp(log_prefix))
    b, c, d = x + 1 - a, 1 / 1e-300, 1 / (x + 1 - a)
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = 1 / (an * d + b if abs(an * d + b) > 1e-300 else 1e-300)
        c = an / c + b if abs(an / c + b) > 1e-300 else 1e-300
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return min(1.0, math.exp(log_prefix) * h)


def chi_square_critical(dof: int, alpha: float) -> float:
    """Return c with P(X ≥ c) = alpha for a chi-square variable with `dof` degrees of freedom (by bisection)."""
    low, high = 0.0, float(dof)
    while chi_square_sf(high, dof) > alpha:
        low, high = high, 2 * high + 1
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if chi_square_sf(middle, dof) > alpha else (low, middle)
    return high


def noncentral_chi_square_sf(statistic: float, dof: int, noncentrality: float) -> float:
    """Return P(X ≥ statistic) for a noncentral chi-square: a Poisson(λ/2) mixture of central ones."""
    half = noncentrality / 2
    total, weight, j = 0.0, math.exp(-half), 0
    while j < half + 40 * math.sqrt(half + 1) + 40:
        total += weight * chi_square_sf(statistic, dof + 2 * j)
        j += 1
        weight *= half / j
    return min(1.0, total)


def power_noncentrality(dof: int, alpha: float, power: float) -> float:
    """Return the smallest noncentrality at which Pearson's test at level `alpha` rejects with `power`."""
    critical = chi_square_critical(dof, alpha)
    low, high = 0.0, 1.0
    while noncentral_chi_square_sf(critical, dof, high) < power:
        low, high = high, 2 * high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if noncentral_chi_square_sf(critical, dof, middle) < power else (low, middle)
    return high


# Pearson's statistic under a true distribution q has noncentrality n·χ²(q‖p), and by Cauchy-Schwarz
# χ²(q‖p) ≥ (Σ|q - p|)² = 4·TV², so n samples detect every deviation of total variation δ or more
# (over the test's bins) with the power that noncentrality 4·n·δ² gives.
def samples_for_tv(tv: float, dof: int, alpha: float, power: float) -> int:
    """Return the samples Pearson's test needs to detect a total variation ≥ `tv` with `power`."""
    return math.ceil(power_noncentrality(dof, alpha, power) / (4 * tv * tv))


# A test counts as powered within 2 % of its target: the bins, and so the degrees of freedom, may settle slightly
# differently at the count drawn than at the count planned.
POWER_SLACK = 1.02


def detectable_tv(samples: int, dof: int, alpha: float, power: float) -> float:
    """Return the smallest total variation `samples` detect with `power` (the inverse of samples_for_tv); 1 when
    they detect nothing (no samples, or one bin: no degree of freedom)."""
    return math.sqrt(power_noncentrality(dof, alpha, power) / (4 * samples)) if samples and dof >= 1 else 1.0


def t_quantile(p: float, dof: int) -> float:
    """Student t's p-quantile (p > 0.5), by bisection on its CDF: the family-adjusted intervals need levels the
    97.5 % table does not hold."""
    low, high = 0.0, 1.0
    while t_cdf(high, dof) < p:
        low, high = high, 2 * high
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, dof) < p else (low, middle)
    return high


def t_cdf(t: float, dof: int) -> float:
    """P(T ≤ t) for t ≥ 0: 1 - I_x(dof/2, 1/2) / 2 with x = dof / (dof + t²)."""
    return 1 - _beta_regularized(dof / (dof + t * t), dof / 2, 0.5) / 2


def _beta_regularized(x: float, a: float, b: float) -> float:
    """I_x(a, b) by its continued fraction (Lentz), flipped to 1 - I_(1-x)(b, a) where that converges faster."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - _beta_regularized(1 - x, b, a)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)) / a
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        for numerator in (even, odd):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1 + numerator / c
            c = c if abs(c) > 1e-300 else 1e-300
            h *= d * c
        if abs(d * c - 1) < 1e-14:
            break
    return front * h


def widened(interval: Sequence[float], dof: int, family: int) -> list[float]:
    """A 95 % interval on a ratio (symmetric in logs, t with `dof`) widened to hold for `family` of them at once
    (Bonferroni): each at 1 - 0.05 / family."""
    if family <= 1 or len(interval) != 2:
        return list(interval)
    centre, half = (math.log(interval[1]) + math.log(interval[0])) / 2, (math.log(interval[1]) - math.log(interval[0])) / 2
    scale = t_quantile(1 - 0.025 / family, dof) / t_975(dof)
    return [math.exp(centre - half * scale), math.exp(centre + half * scale)]
