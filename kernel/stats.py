"""Small statistics both sides share: Student t's quantile, the ratio between two runs' speeds, and χ² tails and power
(the registry re-judges a stored sampling test's power with them)."""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence

# Student t's 97.5th percentile by degrees of freedom: the engines' environment has no scipy,
# and a fixed table of 30 values is all a paired-blocks interval needs (1.96 beyond).
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t_975(dof: int) -> float:
    return T_975[dof - 1] if dof <= len(T_975) else 1.96


Z_975 = 1.959964


def wilson(rate: float, units: float) -> tuple[float, float]:
    """Wilson's 95 % interval for a share observed over `units` (> 0) independent units (fractional: effective ones)."""
    z2 = Z_975 * Z_975
    centre = (rate + z2 / (2 * units)) / (1 + z2 / units)
    half = Z_975 * math.sqrt(rate * (1 - rate) / units + z2 / (4 * units * units)) / (1 + z2 / units)
    return max(0.0, centre - half), min(1.0, centre + half)


def ratio_between(
    before: Sequence[float], after: Sequence[float], *, firsts: tuple[int, int] = (4, 4), drift: float = 0.0
) -> tuple[float, float, float] | None:
    """Return after's speedup over before's, from each run's paired block ratios, with its 95 % interval.

    `firsts` are each run's Stein first stage (its length where the run's count was fixed), `drift` the log spread
    of a pair's true speed from run to run. Each run's share is its Stein interval's: max(first-stage, all-pairs)
    stdev over sqrt(n), with first - 1 dof. Plain Welch on all pairs covered 0.93 at CV 8 % (issue 39), since
    Stein chose n from the first stage's spread. The shares' t takes Welch-Satterthwaite's dof from those
    first-stage dof (3 to 6 for two first stages of 4; 0.95 at worst over CVs of 1 to 40 %, simulated); the drift, a stated figure
    rather than one these runs estimate, adds its normal half-width in quadrature (two runs: sqrt(2) drift).
    None when either run has fewer than two ratios: no spread, no interval.
    """
    if len(before) < 2 or len(after) < 2:
        return None
    shares = [_stein_share(run, first) for run, first in zip((before, after), firsts, strict=True)]
    centre = shares[1][0] - shares[0][0]
    error = math.sqrt(shares[0][1] + shares[1][1])
    dof = error**4 / sum(share**2 / own for _, share, own in shares) if error else math.inf
    # Rounded down (a wider interval), past the float error that puts two equal shares' 2 at 1.999….
    half = math.hypot(t_975(max(1, math.floor(min(dof, 31) + 1e-9))) * error, 1.96 * math.sqrt(2) * drift)
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


def _stein_share(ratios: Sequence[float], first: int) -> tuple[float, float, int]:
    """Return one run's mean log ratio, its variance share as its Stein interval has it, and that share's dof."""
    logs = [math.log(r) for r in ratios]
    first = min(max(2, first), len(logs))
    spread = max(_stdev(logs[:first]), _stdev(logs))
    return statistics.fmean(logs), spread**2 / len(logs), first - 1


def _stdev(values: Sequence[float]) -> float:
    # statistics.stdev sums exactly in fractions, some 100 µs a call: the simulations that hold the regression
    # flag to its error rates (tests/kernel/test_regression_interval.py) make tens of thousands of them.
    centre = statistics.fmean(values)
    return math.sqrt(math.fsum((v - centre) ** 2 for v in values) / (len(values) - 1))


# Earlier runs of a pair give a run-to-run spread from this many degrees of freedom on (3 runs of one pair): with
# 2 dof, false flags at a true 10 % spread stayed under 5 % (tests/kernel/test_regression_interval.py).
MIN_HISTORY_DOF = 2


def run_to_run_spread(runs_by_pair: Sequence[Sequence[Sequence[float]]]) -> float | None:
    """Return the log spread of a pair's true speed from run to run, from earlier runs' block ratios by pair.

    Each pair's runs scatter about that pair's own mean (pooled, so that a new draft revision's real change is
    not counted as noise); the blocks' own share of that scatter, each run's variance over n, comes off.
    None below MIN_HISTORY_DOF: two runs tell next to nothing about a spread.
    """
    scatter, within, dof = 0.0, [], 0
    for runs in runs_by_pair:
        timed = [[math.log(r) for r in ratios] for ratios in runs if len(ratios) >= 2]
        if len(timed) < 2:
            continue
        means = [statistics.fmean(logs) for logs in timed]
        scatter += statistics.variance(means) * (len(means) - 1)
        within += [statistics.variance(logs) / len(logs) for logs in timed]
        dof += len(means) - 1
    if dof < MIN_HISTORY_DOF:
        return None
    return math.sqrt(max(0.0, scatter / dof - statistics.fmean(within)))


# The half-width a printed drop is read from is a flagged comparison's, and flagged comparisons are the narrower ones:
# read from it as it stands, a fresh comparison at the printed drop was flagged 0.40-0.53 of the time (issue 56 §5;
# GPU and CPU, CV 1-15 %, the pair moving by its floor). Widened by this factor it is flagged about half the time or
# more, but only on average over comparisons: the half-width is itself a draw, and at CV 15 % 0.26-0.35 of the drops
# it printed were flagged less than half the time, 0.39-0.42 at the 10th percentile (issue 63 item 5).
DETECTABLE_WIDENING = 1.15
# So no figure read from one comparison's half-width holds for each figure printed. One from the plan does: the
# default plan's (Stein's first 4 pairs, at most 12 on a GPU and 6 on the CPU class, the run-to-run floors 3.3 % and
# 6 %) log margin below 1 - tolerance at which a fresh comparison is flagged half the time at CV 15 %, the worst the
# promise covers: 0.1996 and 0.2973 simulated, rounded up so that it is flagged 0.52 of the time there. Steadier
# timings, or a pair that moves less, are flagged more often at it (tests/kernel/test_detectable_drop.py).
DETECTABLE_LEAST_GPU, DETECTABLE_LEAST_CPU = 0.205, 0.305


def detectable_drop(interval: Sequence[float], tolerance: float, *, least: float) -> float | None:
    """Return a drop a fresh comparison of the pair flags at least half the time: `least`, the plan's log margin
    below 1 - tolerance (DETECTABLE_LEAST_GPU or _CPU), or this comparison's own half-width widened by
    DETECTABLE_WIDENING where that is larger.

    The flag fires when the interval's top lies below 1 - tolerance, so half the time when the true ratio sits
    the fresh comparison's median half-width (log scale, its noise included) below that line. `least` holds for each
    figure printed wherever the timings scatter by up to 15 % and the pair moves no more than its floor, on the plan
    it was simulated for; the widened half-width only ever raises the figure, and past CV 15 % holds on average only.
    """
    if len(interval) != 2 or interval[0] <= 0:
        return None
    half = max(least, DETECTABLE_WIDENING * math.log(interval[1] / interval[0]) / 2)
    return 1 - (1 - tolerance) * math.exp(-half)


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
    return _inverse(lambda x: noncentral_chi_square_sf(critical, dof, x), power, steps=60)


def _inverse(rising: Callable[[float], float], target: float, *, steps: int) -> float:
    """The x ≥ 0 where the rising function `rising` reaches `target`, by bisection from [0, 1], doubled until it
    brackets it; `steps` halvings."""
    low, high = 0.0, 1.0
    while rising(high) < target:
        low, high = high, 2 * high
    for _ in range(steps):
        middle = (low + high) / 2
        low, high = (middle, high) if rising(middle) < target else (low, middle)
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
    return _inverse(lambda x: t_cdf(x, dof), p, steps=80)


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
    scale = _family_scale(dof, family)
    return [math.exp(centre - half * scale), math.exp(centre + half * scale)]


# Cached: the level claims (result.level_claims) widen every level's interval, and the simulations that hold their
# error rates (tests/kernel/test_slower_error_rates.py) judge tens of thousands of plans; the bisection takes 1 ms.
@functools.lru_cache(maxsize=256)
def _family_scale(dof: int, family: int) -> float:
    return t_quantile(1 - 0.025 / family, dof) / t_975(dof)


@functools.lru_cache(maxsize=256)
def f_quantile(p: float, first: int, second: int) -> float:
    """Fisher's F p-quantile with (`first`, `second`) degrees of freedom, by bisection on its CDF (the regularised
    incomplete beta at first·x / (first·x + second))."""
    return _inverse(lambda x: _f_cdf(x, first, second), p, steps=80)


def _f_cdf(x: float, first: int, second: int) -> float:
    return _beta_regularized(first * x / (first * x + second), first / 2, second / 2)
