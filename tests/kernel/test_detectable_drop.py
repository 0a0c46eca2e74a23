"""Issue 63 item 5: the detectable drop printed beside a regression flag holds for each figure printed, not only on
average (simulation, kernel.stats.detectable_drop, no database).

The runs are tests/kernel/test_regression_floor.py's (Stein's first stage of 4 pairs, then as many as Stein.total
asks, at most 12 on a GPU and 6 on the CPU class), drawn and compared with numpy, ratio_between's arithmetic written
out for arrays (test_the_arrays_judge_each_comparison_as_ratio_between_does holds the two equal). A fresh
comparison at a true log change c is flagged when c + (centre error + half-width) < ln(1 - tolerance), and that
sum's law does not depend on c: Stein's count reads the spread alone. So the chance a fresh comparison flags a
printed drop is that law's distribution function at the drop's log margin below the tolerance's line, read off one
sorted sample of fresh comparisons for every printed drop at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from kernel.stats import (
    DETECTABLE_LEAST_CPU,
    DETECTABLE_LEAST_GPU,
    DETECTABLE_WIDENING,
    T_975,
    detectable_drop,
    ratio_between,
    t_975,
)
from tests.kernel.test_regression_floor import CPU, FLOORS, GPU, TOLERANCE
from workers.metrics import Stein

Floats = npt.NDArray[np.float64]
LEAST = {GPU: DETECTABLE_LEAST_GPU, CPU: DETECTABLE_LEAST_CPU}
T_BY_DOF = np.array((math.inf, *T_975, 1.96))  # t_975 by whole dof, 31 standing for 1.96
FRESH, FIRST = 200_000, 40_000  # fresh comparisons per law, first comparisons per cell
CVS = (0.01, 0.03, 0.08, 0.15)
LINE = math.log(1 - TOLERANCE)


def stein_runs(rng: np.random.Generator, rule: Stein, cv: float, count: int, drift: float) -> tuple[Floats, Floats, Floats]:
    """`count` runs' log block ratios about 0, moved by `drift`: each run's mean, Stein variance share and pairs."""
    logs = rng.normal(0, drift, count)[:, None] + rng.normal(0, cv, (count, rule.most))
    first = logs[:, : rule.first].std(axis=1, ddof=1)
    needed = np.maximum(rule.first, np.ceil((t_975(rule.first - 1) * first / math.log1p(rule.target)) ** 2))
    totals = np.minimum(needed + needed % 2, rule.most)
    timed = np.arange(rule.most)[None, :] < totals[:, None]
    means = np.where(timed, logs, 0).sum(axis=1) / totals
    every = np.sqrt((np.where(timed, logs - means[:, None], 0) ** 2).sum(axis=1) / (totals - 1))
    return means, np.maximum(first, every) ** 2 / totals, np.where(timed, logs, np.nan)


def comparisons(
    rng: np.random.Generator, rule: Stein, cv: float, count: int, drift: float, assumed: float
) -> tuple[Floats, Floats, Floats, Floats]:
    """Now over before for `count` unchanged pairs, as ratio_between judges it: log centres and half-widths (and the
    runs' logs, NaN past each run's count)."""
    (before, before_share, before_logs), (now, now_share, now_logs) = (stein_runs(rng, rule, cv, count, drift) for _ in range(2))
    error = np.sqrt(before_share + now_share)
    dof = error**4 / ((before_share**2 + now_share**2) / (rule.first - 1))
    t = T_BY_DOF[np.maximum(1, np.floor(np.minimum(dof, 31) + 1e-9)).astype(int)]
    return now - before, np.hypot(t * error, 1.96 * math.sqrt(2) * assumed), before_logs, now_logs


def flag_chance(rng: np.random.Generator, rule: Stein, cv: float, drift: float) -> Callable[[Floats], Floats]:
    """Return the chance a fresh comparison flags a true change sitting each given log margin below the line."""
    centre, half, _, _ = comparisons(rng, rule, cv, FRESH, drift, drift)
    law = np.sort(centre + half)
    return lambda margins: np.searchsorted(law, margins) / FRESH


def printed_margins(rng: np.random.Generator, rule: Stein, cv: float, drift: float, least: float) -> Floats:
    """The log margins below the line of the drops printed beside flags, true drops spread over 10-30 %."""
    centre, half, _, _ = comparisons(rng, rule, cv, FIRST, drift, drift)
    centre += np.log(1 - rng.uniform(0.1, 0.3, FIRST))
    flagged = centre + half < LINE
    drops = [detectable_drop([math.exp(c - h), math.exp(c + h)], TOLERANCE, least=least) or math.nan
             for c, h in zip(centre[flagged], half[flagged], strict=True)]  # fmt: skip
    margins: Floats = LINE - np.log1p(-np.array(drops))
    return margins


def test_the_printed_drop_is_the_plans_least_or_the_widened_half_width_where_that_is_larger():
    least = DETECTABLE_LEAST_GPU
    assert detectable_drop([], TOLERANCE, least=least) is None  # AL: counted, no interval
    assert detectable_drop([0.8, 0.8], TOLERANCE, least=least) == pytest.approx(1 - 0.95 * math.exp(-least))
    narrow, wide = 0.9 * least / DETECTABLE_WIDENING, 1.1 * least / DETECTABLE_WIDENING
    assert detectable_drop([math.exp(-0.3 - narrow), math.exp(-0.3 + narrow)], TOLERANCE, least=least) == pytest.approx(
        1 - 0.95 * math.exp(-least)
    )
    widened = 1 - 0.95 * math.exp(-DETECTABLE_WIDENING * wide)  # a noisier comparison: on average only (issue 56 §5)
    assert detectable_drop([math.exp(-0.3 - wide), math.exp(-0.3 + wide)], TOLERANCE, least=least) == pytest.approx(widened)


def test_the_arrays_judge_each_comparison_as_ratio_between_does():
    rng = np.random.default_rng(5)
    for rule in (GPU, CPU):
        for cv in (0.01, 0.08, 0.15):
            centres, halves, befores, nows = comparisons(rng, rule, cv, 200, FLOORS[rule], FLOORS[rule])
            for centre, half, before, now in zip(centres, halves, befores, nows, strict=True):
                ratios = [np.exp(logs[~np.isnan(logs)]).tolist() for logs in (before, now)]
                found = ratio_between(*ratios, firsts=(rule.first, rule.first), drift=FLOORS[rule])
                assert found is not None and math.log(found[0]) == pytest.approx(centre, abs=1e-12)
                assert math.log(found[2] / found[1]) / 2 == pytest.approx(half, abs=1e-12)


@pytest.mark.parametrize("cv", CVS)
@pytest.mark.parametrize("rule", [GPU, CPU], ids=["gpu", "cpu"])
@pytest.mark.parametrize("drift", ["floor", "steady"])
def test_a_fresh_comparison_flags_every_printed_drop_at_least_half_the_time(rule, cv, drift):
    """Issue 63 item 5 (40,000 first comparisons a cell, CV 1 / 3 / 8 / 15 %). Before, the widened half-width alone,
    the pair moving by its floor: 0 / 0 / 0.10 / 0.26 of the printed drops flagged less than half the time on a GPU,
    0 / 0 / 0.07 / 0.35 on the CPU class (the review: 7-14 % at CV 8 %, 30-55 % at 15 %), 0.42 / 0.39 at CV 15 %'s
    10th percentile; a steady history (no run-to-run spread, none assumed) 0.19-0.50 at every CV, 0.26-0.37 at the
    10th percentile, single figures 0.03. Now the least flagged, over every cell, 0.525 (the floor, CPU, CV 15 %)."""
    moves = FLOORS[rule] if drift == "floor" else 0.0
    rng = np.random.default_rng([int(cv * 100), rule.most, len(drift)])
    chance = flag_chance(rng, rule, cv, moves)
    now = chance(printed_margins(rng, rule, cv, moves, LEAST[rule]))
    before = chance(printed_margins(rng, rule, cv, moves, 0.0))
    said = f"{rule.most} pairs at most, CV {cv}, {drift}: {len(now)} flags, least flagged {now.min():.3f} (before "
    said += f"{np.mean(before < 0.5):.2f} under half, 10th percentile {np.quantile(before, 0.1):.2f})"
    assert now.min() >= 0.5, said
    assert np.mean(before < 0.5) > 0.05 if cv == 0.15 else True, said


@pytest.mark.parametrize("rule", [GPU, CPU], ids=["gpu", "cpu"])
def test_the_least_is_the_plans_half_chance_margin_at_cv_15_percent_and_little_more(rule):
    """The least printed drop is flagged 0.526 / 0.522 of the time (GPU / CPU) at CV 15 %, the pair moving by its
    floor: about half, so the promise costs no more than it must there (0.1996 / 0.2973 is half, 0.501 / 0.499)."""
    chance = flag_chance(np.random.default_rng(rule.most), rule, 0.15, FLOORS[rule])
    (at_least,) = chance(np.array([LEAST[rule]]))
    assert 0.5 <= at_least <= 0.55, at_least
