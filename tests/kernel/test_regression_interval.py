"""The regression flag on a timed figure keeps its error rates (simulation, kernel.stats.ratio_between).

Each run times Stein's first stage of 4 pairs and then as many as workers.metrics.Stein.total asks (at most 12,
GPU_MOST_PAIRS, or 6 on the CPU class); its log block ratios scatter at a CV of 3, 8 or 15 %, about a true speed that
itself moves from run to run by `drift` (lognormal, the pair's run-to-run spread). Figures for docs/measuring.md.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

import pytest

from kernel.stats import DETECTABLE_WIDENING, detectable_drop, ratio_between, run_to_run_spread, t_975
from workers.metrics import Stein

RUNS, TOLERANCE, SPEEDUP = 4000, 0.05, 1.5
GPU, CPU = Stein(first=4, most=12, target=0.05), Stein(first=4, most=6, target=0.05)
# The run-to-run floors registry.runs.regressions assumes where a pair's history cannot say
# (tests/registry/test_regression_history.py holds them equal).
GPU_FLOOR, CPU_FLOOR = 0.033, 0.06  # 3 % on a GPU until issue 56 §4 (tests/kernel/test_regression_floor.py)
FIRSTS = (4, 4)


def stein_run(rng: random.Random, rule: Stein, cv: float, speed: float, drift: float = 0.0) -> list[float]:
    """One run's block ratios: its true speed moved by `drift`, then Stein's first stage and the pairs it asks for."""
    true = speed * math.exp(rng.gauss(0, drift))
    first = [true * math.exp(rng.gauss(0, cv)) for _ in range(rule.first)]
    return first + [true * math.exp(rng.gauss(0, cv)) for _ in range(rule.total(first) - rule.first)]


def welch(before: Sequence[float], after: Sequence[float]) -> tuple[float, float]:
    """The interval ratio_between gave before issue 39: Welch's t on all pairs, as if their counts were fixed."""
    logs = [[math.log(r) for r in run] for run in (before, after)]
    shares = [statistics.variance(run) / len(run) for run in logs]
    dof = sum(shares) ** 2 / sum(share**2 / (len(run) - 1) for share, run in zip(shares, logs, strict=True))
    centre, half = statistics.fmean(logs[1]) - statistics.fmean(logs[0]), t_975(math.floor(dof)) * math.sqrt(sum(shares))
    return math.exp(centre - half), math.exp(centre + half)


def flag_rate(
    rng: random.Random, rule: Stein, cv: float, change: float, *, drift: float, assumed: float, runs: int = RUNS
) -> float:
    """How often now-over-before's interval lies wholly below 1 - TOLERANCE when the true change is `change`."""
    flagged = 0
    for _ in range(runs):
        before = stein_run(rng, rule, cv, SPEEDUP, drift)
        after = stein_run(rng, rule, cv, SPEEDUP * change, drift)
        compared = ratio_between(before, after, firsts=FIRSTS, drift=assumed)
        assert compared is not None
        flagged += compared[2] < 1 - TOLERANCE
    return flagged / runs


@pytest.mark.parametrize("cv", [0.03, 0.08, 0.15])
@pytest.mark.parametrize("rule", [GPU, CPU], ids=["gpu", "cpu"])
def test_the_interval_covers_the_true_change_95_percent_of_the_time_at_steins_sample_sizes(rule, cv):
    """Figures (20,000 draws, CV 3/8/15 %): GPU 0.962/0.974/0.987, CPU 0.963/0.977/0.981; with the pair moving by
    its floor and the floor assumed, GPU 0.957/0.971/0.984, CPU 0.952/0.968/0.979. Plain Welch on all pairs: GPU
    0.942/0.926/0.946, CPU 0.950/0.949/0.955."""
    rng, covered, welch_covered = random.Random(f"cover-{rule.most}-{cv}"), 0, 0
    for _ in range(RUNS):
        before, after = stein_run(rng, rule, cv, SPEEDUP), stein_run(rng, rule, cv, SPEEDUP)
        _, low, high = ratio_between(before, after, firsts=FIRSTS) or (0, 0, 0)
        covered += low <= 1 <= high
        if rule is GPU and cv == 0.08:  # the defect (issue 39 §5): Stein's n depends on the first stage's spread
            welch_low, welch_high = welch(before, after)
            welch_covered += welch_low <= 1 <= welch_high
    assert covered / RUNS >= 0.95, f"{rule.most} pairs at most, CV {cv}: covers {covered / RUNS:.3f}"
    assert welch_covered / RUNS < 0.94 if rule is GPU and cv == 0.08 else True, welch_covered / RUNS


@pytest.mark.parametrize("cv", [0.03, 0.08, 0.15])
def test_an_unchanged_pair_is_flagged_at_most_2_5_percent_without_and_5_percent_at_6_percent_run_to_run(cv):
    """A GPU pair on the 3 % floor (3.3 % since issue 56 §4, which lowers each figure: 4.0 % at 6 %, CV 3 %). Figures
    (20,000 draws, CV 3/8/15 %): no spread 0.00/0.01/0.05 %, 4 %
    0.8/0.5/0.3 %, 6 % 4.7/2.9/1.2 %, 10 % 15/11/6 % (beyond the floor: its own history then has to tell, as below).
    A CPU pair on its 6 % floor: 0.6/0.4/0.4 % at 6 %, 5.7/4.0/2.3 % at 10 %. The old Welch rule: 4.4/9.9/20 % at
    4/6/10 % (GPU, CV 8 %)."""
    rng = random.Random(f"unchanged-{cv}")
    assert flag_rate(rng, GPU, cv, 1.0, drift=0.0, assumed=GPU_FLOOR) <= 0.025
    at_6 = flag_rate(rng, GPU, cv, 1.0, drift=0.06, assumed=GPU_FLOOR)
    assert at_6 <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / RUNS), f"CV {cv}: {at_6:.3%} flagged at a 6 % spread"


def test_a_drop_at_the_tolerance_is_flagged_at_most_2_5_percent_of_the_time():
    """Within the tolerance a drop is no regression: the interval's one-sided 97.5 % keeps it unflagged, with no
    run-to-run spread assumed (2.0 % at CV 3 %, 20,000 draws; 1.3 and 0.8 % at 8 and 15 %)."""
    rng = random.Random("at-tolerance")
    assert flag_rate(rng, GPU, 0.03, 1 - TOLERANCE, drift=0.0, assumed=0.0, runs=RUNS // 2) <= 0.025


@pytest.mark.parametrize(("rule", "floor", "least"), [(GPU, GPU_FLOOR, 0.6), (CPU, CPU_FLOOR, 0.15)], ids=["gpu", "cpu"])
def test_a_real_15_percent_drop_is_flagged_simulated(rule, floor, least):
    """Power at a true 15 % drop on the floor (20,000 draws, CV 3/8/15 %): GPU 0.80/0.34/0.11 for a steady pair,
    0.63/0.39/0.15 for one moving by a 3 % floor; CPU 0.24/0.15/0.08 moving by its 6 % floor. On the 3.3 % GPU floor
    (issue 56 §4) a steady pair's is 0.67 at CV 3 %. The floor's own
    half-width, 1.96 sqrt(2) floor, bounds it whatever the CV: a CPU drop under about 20 % is flagged under half the
    time until the pair's history shows it steadier."""
    rng = random.Random(f"slower-{rule.most}")
    power = flag_rate(rng, rule, 0.03, 0.85, drift=0.0 if rule is GPU else floor, assumed=floor, runs=RUNS // 2)
    assert power >= least, f"{power:.3%} of 15 % drops flagged"


def test_a_pairs_own_history_keeps_false_flags_under_5_percent_at_a_10_percent_run_to_run_spread():
    """Three earlier runs of the pair (the previous one among them) give its spread; the GPU floor alone flagged 11 %.
    Figures (10,000 draws, CV 3/8/15 %): GPU 3.8/2.9/1.7 % at 10 %, 1.8/1.1/0.4 % at 6 %; CPU 3.3/2.6/1.1 % at 10 %.
    A 15 % drop of a steady pair is then flagged 0.99/0.58/0.14 (GPU), 0.98/0.30/0.07 (CPU)."""
    rng, flagged = random.Random("history"), 0
    for _ in range(RUNS // 2):
        earlier = [stein_run(rng, GPU, 0.08, SPEEDUP, 0.10) for _ in range(3)]
        now = stein_run(rng, GPU, 0.08, SPEEDUP, 0.10)
        spread = run_to_run_spread([earlier])
        assert spread is not None
        compared = ratio_between(earlier[-1], now, firsts=FIRSTS, drift=spread) or (0, 0, 2)
        flagged += compared[2] < 1 - TOLERANCE
    assert flagged / (RUNS // 2) <= 0.05


def test_the_interval_combines_each_runs_stein_spread_and_the_run_to_run_spread_constructed():
    assert ratio_between([1.0], [1.0, 1.0]) is None  # one ratio: no spread, no interval
    centre, low, high = ratio_between([2.0, 2.0], [1.0, 1.0]) or (0, 0, 0)
    assert (centre, low, high) == (0.5, 0.5, 0.5)  # no scatter and no drift: the interval is the point
    before, after = [1.0, math.e**0.2], [1.0, math.e**0.2]  # centre 1, s² = 0.02 each, dof 1 each: Welch's 2
    centre, low, high = ratio_between(before, after) or (0, 0, 0)
    assert centre == pytest.approx(1.0) and high == pytest.approx(math.exp(4.303 * math.sqrt(0.02 / 2 * 2)))
    _, _, high = ratio_between(before, after, drift=0.05) or (0, 0, 0)  # half-widths add in quadrature
    assert high == pytest.approx(math.exp(math.hypot(4.303 * math.sqrt(0.02), 1.96 * math.sqrt(2) * 0.05)))
    # Stein's spread: the first stage's where the later pairs scatter less; t from the first stages' dof.
    steady = [1.0, math.e**0.2, 1.0, math.e**0.2, *[math.e**0.1] * 4]
    first = statistics.stdev([0, 0.2, 0, 0.2])
    _, low, high = ratio_between(steady, steady, firsts=(4, 4)) or (0, 0, 0)
    assert math.log(high) == pytest.approx(2.447 * math.sqrt(2 * first**2 / 8))  # dof 3 + 3 = 6


def test_a_pairs_run_to_run_spread_comes_from_its_own_runs_less_their_blocks_share():
    assert run_to_run_spread([[[1.0, 1.1], [1.2, 1.3]]]) is None  # two runs: one dof, too few
    assert run_to_run_spread([[[1.0, 1.1]], [[1.2, 1.3]], [[1.5, 1.6]]]) is None  # one run of each revision: none
    steady = [[1.5, 1.5], [1.5, 1.5], [1.5, 1.5]]
    revisions = [steady, [[r * 1.3 for r in run] for run in steady]]  # a new revision 30 % faster is no noise
    assert run_to_run_spread(revisions) == 0.0
    moving = [[1.0, 1.0], [1.1, 1.1], [1.2, 1.2]]
    assert run_to_run_spread([moving]) == pytest.approx(statistics.stdev(math.log(run[0]) for run in moving))


def test_the_detectable_drop_is_the_tolerance_and_the_intervals_half_width():
    # No least here: the plan's own (issue 63 item 5) is tests/kernel/test_detectable_drop.py's.
    assert detectable_drop([], TOLERANCE, least=0.0) is None  # AL: counted, no interval
    assert detectable_drop([0.8, 0.8], TOLERANCE, least=0.0) == pytest.approx(TOLERANCE)  # an exact comparison sees past 5 %
    half = 0.1
    widened = 1 - 0.95 * math.exp(-DETECTABLE_WIDENING * half)  # a flagged interval is the narrower (issue 56 §5)
    assert detectable_drop([math.exp(-0.3 - half), math.exp(-0.3 + half)], TOLERANCE, least=0.0) == pytest.approx(widened)
