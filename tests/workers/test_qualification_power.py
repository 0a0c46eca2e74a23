"""The power each sampling control states is the power it has: checked by simulation, no engine."""

from __future__ import annotations

import random

import pytest

from kernel import stats
from workers import metrics

ALPHA, POWER, TV = 0.001 / 4, 0.99, 0.1


def distribution(size: int = 40, seed: int = 3) -> dict[int, float]:
    rng = random.Random(seed)
    weights = [rng.random() ** 3 for _ in range(size)]
    return {token: w / sum(weights) for token, w in enumerate(weights)}


def least_detectable(exact: dict[int, float], tv: float) -> dict[int, float]:
    """The hardest deviation of total variation `tv` for Pearson's test: mass moved in proportion to p,
    from one half of the distribution to the other, where χ²(q‖p) = 4·TV² and the bound is tight."""
    ranked = sorted(exact, key=exact.__getitem__, reverse=True)
    half, mass = [], 0.0
    for token in ranked:
        if mass >= 0.5:
            break
        half.append(token)
        mass += exact[token]
    up = set(half)
    return {t: p * (1 + tv / mass if t in up else 1 - tv / (1 - mass)) for t, p in exact.items()}


def rejections(truth: dict[int, float], exact: dict[int, float], samples: int, trials: int, max_bins: int) -> float:
    rng = random.Random(7)
    tokens, weights = list(truth), list(truth.values())
    found = 0
    for _ in range(trials):
        drawn = rng.choices(tokens, weights, k=samples)
        found += metrics.chi_square_test(drawn, exact, max_bins=max_bins)["p_value"] < ALPHA
    return found / trials


def test_the_critical_values_are_the_tabled_ones():
    assert stats.chi_square_critical(1, 0.001) == pytest.approx(10.828, abs=0.01)
    assert stats.chi_square_critical(15, 0.001) == pytest.approx(37.697, abs=0.01)


def test_sample_count_and_detectable_tv_are_inverses():
    needed = stats.samples_for_tv(TV, 15, ALPHA, POWER)
    assert stats.detectable_tv(needed, 15, ALPHA, POWER) <= TV < stats.detectable_tv(needed - 50, 15, ALPHA, POWER)


def test_a_deviation_of_the_stated_size_is_caught_at_least_as_often_as_stated():
    exact = distribution()
    needed = stats.samples_for_tv(TV, 15, ALPHA, POWER)
    assert rejections(least_detectable(exact, TV), exact, needed, trials=300, max_bins=16) >= 0.97


def test_the_exact_distribution_itself_is_rarely_rejected():
    exact = distribution()
    assert rejections(exact, exact, 1500, trials=200, max_bins=16) <= 0.02


def test_observed_total_variation_is_measured_over_the_bins_and_the_rest():
    exact = {0: 0.5, 1: 0.3, 2: 0.2}
    assert metrics.total_variation([0] * 50 + [1] * 50, exact, [0, 1]) == pytest.approx(0.2)


def test_a_deviation_well_under_the_stated_size_is_often_missed_so_the_statement_is_not_loose():
    exact = distribution()
    needed = stats.samples_for_tv(TV, 15, ALPHA, POWER)
    assert rejections(least_detectable(exact, TV / 2), exact, needed, trials=100, max_bins=16) < 0.5
