"""The figures a certification reports, as pure functions of what the engines returned."""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kernel.result import Acceptance, ChiSquare, Divergence, Greedy
from kernel.stats import t_975
from workers.engines.base import SpecCounters


def acceptance(counters: SpecCounters) -> Acceptance:
    """Return AL = 1 + accepted/drafts, rate = accepted/draft tokens, per-position rates, and the raw counts."""
    drafts = counters.drafts
    return {
        "mean_acceptance_length": 1 + counters.accepted / drafts if drafts else None,
        "acceptance_rate": counters.accepted / counters.draft_tokens if counters.draft_tokens else None,
        "per_position": [n / drafts for n in counters.per_position] if drafts else [],
        "counts": {
            "drafts": drafts,
            "draft_tokens": counters.draft_tokens,
            "accepted": counters.accepted,
            "accepted_per_position": list(counters.per_position),
        },
    }


def first_divergence(expected: Sequence[int], found: Sequence[int]) -> int | None:
    """Return the first token index where the two outputs differ (a length difference counts), else None."""
    for index, (a, b) in enumerate(zip(expected, found, strict=False)):
        if a != b:
            return index
    return None if len(expected) == len(found) else min(len(expected), len(found))


def greedy_equivalence(expected: Sequence[Sequence[int]], found: Sequence[Sequence[int]]) -> Greedy:
    """Return the exact-match rate and, for every mismatched prompt, where it first diverges."""
    divergences: list[Divergence] = [
        {"prompt": index, "token": where}
        for index, (a, b) in enumerate(zip(expected, found, strict=True))
        if (where := first_divergence(a, b)) is not None
    ]
    total = len(expected)
    return {"exact_match": (total - len(divergences)) / total if total else None, "prompts": total, "divergences": divergences}


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


def chi_square_test(
    samples: Sequence[int], probabilities: dict[int, float], min_expected: float = 5.0, max_bins: int | None = None
) -> ChiSquare:
    """Pearson's test of sampled tokens against an exact distribution.

    Tokens whose expected count is under `min_expected` are pooled into one
    bin, so the chi-square approximation holds; with `max_bins`, so are all
    but the likeliest max_bins - 1 (fewer degrees of freedom, more power).
    """
    n = len(samples)
    counts = Counter(samples)
    kept = own_bins(probabilities, n, max_bins or len(probabilities) + 1, min_expected)
    bins = [(counts[t], probabilities[t] * n) for t in kept]
    rest_expected = n - sum(e for _, e in bins)
    rest_observed = n - sum(o for o, _ in bins)
    if rest_expected >= min_expected or rest_observed:
        bins.append((rest_observed, max(rest_expected, 1e-12)))
    statistic = sum((o - e) ** 2 / e for o, e in bins)
    dof = max(len(bins) - 1, 1)
    return {"samples": n, "bins": len(bins), "statistic": statistic, "dof": dof, "p_value": chi_square_sf(statistic, dof)}


def percentile(values: Sequence[float], q: float) -> float | None:
    """Return the q-th percentile (0-100) by linear interpolation, None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Stein:
    """Stein's two-stage rule: time `first` pairs, and from their spread alone fix how many in all.

    The interval is mean(all logs) ± t(first - 1) · s_first / sqrt(total). Since the total depends
    only on the first stage's spread, which is independent of the mean, the interval is exact for
    normal log ratios, cap included: the cap costs precision, never coverage. Stopping when the
    running t interval looks narrow enough does not keep coverage (issue 24 simulated 0.90 at
    CV 8 %), and neither would stopping on whether the interval excludes 1.
    """

    first: int  # pairs timed before the rule looks
    most: int  # pairs at most
    target: float  # the half-width wanted, relative: 0.05 is ±5 %

    def total(self, first_ratios: Sequence[float]) -> int:
        """How many pairs in all, from the first stage's ratios: whole A B B A quadruples, at most `most`."""
        spread = statistics.stdev(math.log(r) for r in first_ratios[: self.first])
        needed = max(self.first, math.ceil((t_975(self.first - 1) * spread / math.log1p(self.target)) ** 2))
        return min(needed + needed % 2, self.most)

    def interval(self, ratios: Sequence[float]) -> tuple[float, float, float, float]:
        """Return the geometric mean of all `ratios`, its 95 % interval, and its relative half-width."""
        logs = [math.log(r) for r in ratios]
        centre = statistics.fmean(logs)
        # Stein's spread is the first stage's; a block stalled after it would hide behind a clean first
        # stage, so the spread of all pairs stands in where it is larger (a wider interval keeps coverage).
        spread = max(statistics.stdev(logs[: self.first]), statistics.stdev(logs))
        half = t_975(self.first - 1) * spread / math.sqrt(len(logs))
        return math.exp(centre), math.exp(centre - half), math.exp(centre + half), math.expm1(half)


def paired_ratio(ratios: Sequence[float]) -> tuple[float, float, float]:
    """Return the geometric mean of paired ratios and its 95 % interval (Student t on the logs).

    Each ratio compares two blocks run next to each other, so load that drifts over the
    run cancels within a pair; what is left varies from pair to pair, and the interval
    is that variation's; it needs two ratios at least.
    """
    if len(ratios) < 2:
        raise ValueError(f"an interval needs two paired ratios at least, not {len(ratios)}")
    logs = [math.log(r) for r in ratios]
    centre = statistics.fmean(logs)
    half = t_975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


def break_even(speedups: dict[int, float]) -> float | None:
    """Return the concurrency where speedup crosses 1, interpolated on a log scale; None if it never does.

    If speculation never wins, the break-even is the lowest level measured.
    """
    levels = sorted(speedups)
    if speedups[levels[0]] <= 1:
        return float(levels[0])
    for low, high in itertools.pairwise(levels):
        if speedups[high] <= 1 < speedups[low]:
            fraction = (speedups[low] - 1) / (speedups[low] - speedups[high])
            return math.exp(math.log(low) + fraction * (math.log(high) - math.log(low)))
    return None


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 and statistics.fmean(values) else None


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


def detectable_tv(samples: int, dof: int, alpha: float, power: float) -> float:
    """Return the smallest total variation `samples` detect with `power` (the inverse of samples_for_tv)."""
    return math.sqrt(power_noncentrality(dof, alpha, power) / (4 * samples)) if samples else 1.0


def own_bins(probabilities: dict[int, float], samples: int, max_bins: int, min_expected: float = 5.0) -> list[int]:
    """Return the tokens that get a bin of their own: expected count ≥ min_expected, the likeliest first."""
    kept = sorted((t for t, p in probabilities.items() if p * samples >= min_expected), key=lambda t: -probabilities[t])
    return sorted(kept[: max_bins - 1])


def total_variation(samples: Sequence[int], probabilities: dict[int, float], tokens: Sequence[int]) -> float:
    """Return the total variation between the samples' frequencies and `probabilities`, over `tokens` plus the rest."""
    n = len(samples)
    if not n:
        return 0.0
    counts = Counter(samples)
    binned = [(counts[t] / n, probabilities.get(t, 0.0)) for t in tokens]
    rest = (1 - sum(q for q, _ in binned), 1 - sum(p for _, p in binned))
    return sum(abs(q - p) for q, p in [*binned, rest]) / 2
