""" "Slower" keeps its error rate at every plan shape (issue 63 §1 and §3): simulated levels, judged by the code every
reader of a level's claim uses (result.level_claims).

Each level is Stein's rule as the throughput stage runs it (workers.metrics.Stein: 4 pairs first, at most 12 on a
GPU plan, ±5 % at c=1 and ±10 % above), vectorised here and held to the real rule by the first test.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from kernel import result
from kernel.stats import t_975
from workers import metrics

RUNS = 6000
FIRST, MOST = 4, 12
GPU = (1, 2, 4, 8, 16, 32, 64)
MARGIN = 1.03


def stein_levels(logs: np.ndarray, target: float) -> np.ndarray:
    """Each row's level (log centre, log half-width) by Stein's rule, from its MOST log paired ratios."""
    runs = len(logs)
    first_spread = logs[:, :FIRST].std(axis=1, ddof=1)
    needed = np.maximum(FIRST, np.ceil((t_975(FIRST - 1) * first_spread / math.log1p(target)) ** 2)).astype(int)
    totals = np.minimum(needed + needed % 2, MOST)
    out = np.empty((runs, 2))
    for total in np.unique(totals):
        at = totals == total
        taken = np.sort(logs[at, :total], axis=1)
        centre = (taken[:, 1:-1] if total >= metrics.TRIM_FROM else taken).mean(axis=1)
        spread = np.maximum(first_spread[at], taken.std(axis=1, ddof=1))
        out[at] = np.stack([centre, t_975(FIRST - 1) * spread / math.sqrt(total)], axis=1)
    return out


def test_the_vectorised_levels_are_the_throughput_stages_stein_rule():
    logs = np.random.default_rng(0).normal(0, 0.08, size=(50, MOST))
    rule = metrics.Stein(first=FIRST, most=MOST, target=0.05)
    for row, (centre, half) in zip(logs, stein_levels(logs, 0.05), strict=True):
        ratios = list(np.exp(row))
        _, low, high, _ = rule.interval(ratios[: rule.total(ratios[:FIRST])])
        assert math.isclose(math.exp(centre - half), low, rel_tol=1e-9) and math.isclose(
            math.exp(centre + half), high, rel_tol=1e-9
        )


def claims_at_c1_and_anywhere(
    truths: tuple[float, ...], cvs: tuple[float, ...], *, limited: tuple[int, ...] = (), seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Simulate a plan (one truth and CV a level, the lowest first) RUNS times: whether c=1 claims slower, and which
    levels claim slower (a matrix, a row a run). `limited` levels carry the measuring machine's evidence."""
    rng = np.random.default_rng(seed)
    targets = [0.05] + [0.10] * (len(truths) - 1)
    drawn = [stein_levels(rng.normal(math.log(truth), cv, size=(RUNS, MOST)), target)
             for truth, cv, target in zip(truths, cvs, targets, strict=True)]  # fmt: skip
    slower = np.zeros((RUNS, len(truths)), dtype=bool)
    for run in range(RUNS):
        levels = {str(c): _level(*drawn[i][run], limited=i in limited) for i, c in enumerate(GPU[: len(truths)])}
        claims = result.level_claims(levels, MARGIN)
        slower[run] = [claims[str(c)] == result.SLOWER for c in GPU[: len(truths)]]
    return slower[:, 0], slower


def _level(centre: float, half: float, *, limited: bool) -> Any:
    stopping = {"reason": result.REACHED, "first_pairs": FIRST, "most_pairs": MOST}
    level = {"speedup": math.exp(centre), "speedup_interval": [math.exp(centre - half), math.exp(centre + half)],
             "stopping": stopping}  # fmt: skip
    return {**level, "limited_by": "the pair's blocks spread 40% (CV)"} if limited else level


def bound(rate: float) -> float:
    """`rate` plus three Monte Carlo standard errors at RUNS."""
    return rate + 3 * math.sqrt(rate * (1 - rate) / RUNS)


@pytest.mark.parametrize("cv", [0.03, 0.08])
def test_a_pair_two_percent_slower_reads_slower_at_most_2_5_percent_with_one_level_or_many_simulated(cv):
    """The review: 14.9-15.4 % at CV 3 % with c=1 alone, against 1. Against 1 / 1.03: under 1 % (one level), and
    under 2.5 % at any level of seven."""
    alone, _ = claims_at_c1_and_anywhere((0.98,), (cv,))
    _, seven = claims_at_c1_and_anywhere((0.98,) * len(GPU), (cv,) * len(GPU), seed=1)
    assert alone.mean() <= 0.025 and seven.any(axis=1).mean() <= 0.025, (alone.mean(), seven.any(axis=1).mean())


@pytest.mark.parametrize("cv", [0.03, 0.08])
def test_the_levels_family_errs_at_most_2_5_percent_at_the_margin_itself_simulated(cv):
    """Every level exactly 1 / 1.03 (the hardest null): some level claims slower at most 2.5 % of the time."""
    _, seven = claims_at_c1_and_anywhere((1 / MARGIN,) * len(GPU), (cv,) * len(GPU), seed=2)
    assert seven.any(axis=1).mean() <= bound(0.025), seven.any(axis=1).mean()


def test_a_pair_ten_percent_slower_everywhere_reads_slower_at_c1_far_more_often_simulated():
    """The fixed sequence from the highest level gave c=1 "slower" in 0.1 % of GPU runs at CV 8 % (the review:
    6.5 %); c=1 on its own half of the error rate, 23 %. On its own, at the full rate, it would be 46 %."""
    c1, _ = claims_at_c1_and_anywhere((0.9,) * len(GPU), (0.08,) * len(GPU), seed=3)
    assert 0.18 <= c1.mean() <= 0.46, c1.mean()


def test_a_level_the_measuring_machine_paced_cannot_hide_a_real_slower_simulated():
    """Issue 63 §3: the top levels' own blocks spread so wide they are set aside; c=1 claims slower as often as when
    every level is timed cleanly (the review: 11.3 % fell to 2.9 % when a paced top level stopped the sequence)."""
    clean, _ = claims_at_c1_and_anywhere((0.9,) * len(GPU), (0.08,) * len(GPU), seed=4)
    paced, _ = claims_at_c1_and_anywhere((0.9,) * len(GPU), (0.08,) * 4 + (0.30,) * 3, limited=(4, 5, 6), seed=4)
    assert paced.mean() >= clean.mean() - 3 * math.sqrt(clean.mean() / RUNS), (clean.mean(), paced.mean())


if __name__ == "__main__":  # the figures behind docs/measuring.md's rows
    shapes = {"0.98 at c=1 alone, CV 3 %": ((0.98,), (0.03,)), "0.98 x7, CV 8 %": ((0.98,) * 7, (0.08,) * 7),
              "1/1.03 x7, CV 3 %": ((1 / MARGIN,) * 7, (0.03,) * 7), "1/1.03 x7, CV 8 %": ((1 / MARGIN,) * 7, (0.08,) * 7),
              "0.9 x7, CV 8 %": ((0.9,) * 7, (0.08,) * 7), "0.9 x7, CV 3 %": ((0.9,) * 7, (0.03,) * 7),
              "0.9 x7, CV 8 %, top 3 paced": ((0.9,) * 7, (0.08,) * 4 + (0.3,) * 3)}  # fmt: skip
    for name, (truths, cvs) in shapes.items():
        c1, every = claims_at_c1_and_anywhere(truths, cvs, limited=(4, 5, 6) if "paced" in name else (), seed=9)
        print(f"{name}: c=1 slower {c1.mean():.4f}, any level {every.any(axis=1).mean():.4f}, top {every[:, -1].mean():.4f}")
