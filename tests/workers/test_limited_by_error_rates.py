"""The limited-by spread rule keeps its error rate (issue 63 §3): a healthy level, both sides' blocks spread alike, is
set aside as the measuring machine's at most 2 % of the time; issue 51's level, and one far more uneven, still are."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workers import metrics, timing

DRAWS = 4000


def old_rule(baseline: list[float], speculative: list[float]) -> bool:
    """Before issue 63: the wider side's CV over 8 % and over 3 times the other's."""
    wide, narrow = sorted((metrics.coefficient_of_variation(side) or 0.0 for side in (baseline, speculative)), reverse=True)
    return wide > 0.08 and wide > 3 * narrow


def set_aside(rule: object, cvs: tuple[float, float], blocks: int, seed: int) -> float:
    """The share of DRAWS levels `rule` sets aside, each side's `blocks` tok/s lognormal at its CV."""
    rng = np.random.default_rng(seed)
    sides = [1000 * np.exp(rng.normal(0, cv, size=(DRAWS, blocks))) for cv in cvs]
    return float(np.mean([rule(list(b), list(s)) for b, s in zip(*sides, strict=True)]))  # type: ignore[operator]


@pytest.mark.parametrize("cv", [0.08, 0.10, 0.15])
def test_a_healthy_level_is_set_aside_at_most_2_percent_of_the_time_simulated(cv):
    """The review: 8.7-11 % at 4 blocks a side, both at CV 8 % or more, under the fixed ratio of 3."""
    now = set_aside(timing.uneven, (cv, cv), 4, seed=int(cv * 100))
    before = set_aside(old_rule, (cv, cv), 4, seed=int(cv * 100))
    assert now <= 0.02 and before > 0.05, (now, before)


def test_issue_51s_level_and_a_side_far_more_uneven_are_still_set_aside_simulated():
    alone, pair = [744.0, 1075, 1049, 1053, 976, 466], [1628.0, 1579, 1612, 1583, 1540, 1526]
    assert timing.uneven(alone, pair) and timing.uneven(pair, alone)
    # A CV ten times the other's: 0.73 of levels at 4 blocks a side (0.95 under the old rule), 0.97 at 6 (0.99). One
    # not set aside keeps the interval its own blocks give: wide, and in the family of levels as measured.
    assert set_aside(timing.uneven, (0.30, 0.03), 4, seed=1) >= 0.65
    assert set_aside(timing.uneven, (0.30, 0.03), 6, seed=2) >= 0.95


def test_the_rule_needs_two_blocks_a_side_and_positive_rates_constructed():
    assert not timing.uneven([1000.0], [900.0, 1500.0]) and not timing.uneven([0.0, 1.0, 2.0], [1.0, 1.0, 1.0])
    assert math.isfinite(timing.SPREAD_LEVEL) and timing.SPREAD_LEVEL * 2 <= 0.02
