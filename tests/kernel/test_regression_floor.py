"""Issue 56 §4 and §5: the regression flag on very steady GPU timings, and the detectable drop printed beside a flag
(simulation, kernel.stats.ratio_between and detectable_drop, no database).

As in tests/kernel/test_regression_interval.py, each run times Stein's first stage of 4 pairs and then as many as
Stein.total asks (at most 12 on a GPU, 6 on the CPU class); its log block ratios scatter at a CV about a true speed
that moves from run to run by `drift`. The runs are drawn with numpy, a whole simulation at once; ratio_between
judges each comparison as the registry does.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from kernel.stats import detectable_drop, ratio_between, t_975
from tests.kernel.test_regression_interval import CPU_FLOOR, GPU_FLOOR
from workers.metrics import Stein

TOLERANCE, SPEEDUP = 0.05, 1.5
GPU, CPU = Stein(first=4, most=12, target=0.05), Stein(first=4, most=6, target=0.05)
FLOORS = {GPU: GPU_FLOOR, CPU: CPU_FLOOR}  # registry.runs.regressions' (tests/registry/test_regression_history.py)


def stein_runs(
    rng: np.random.Generator, rule: Stein, cv: float, speeds: npt.NDArray[np.float64], drift: float
) -> list[list[float]]:
    """One run per speed: its true speed moved by `drift`, Stein's first stage, then the pairs Stein.total asks for."""
    true = speeds * np.exp(rng.normal(0, drift, len(speeds)))
    logs = np.log(true)[:, None] + rng.normal(0, cv, (len(speeds), rule.most))
    spread = logs[:, : rule.first].std(axis=1, ddof=1)
    needed = np.maximum(rule.first, np.ceil((t_975(rule.first - 1) * spread / math.log1p(rule.target)) ** 2)).astype(int)
    totals = np.minimum(needed + needed % 2, rule.most)
    ratios = np.exp(logs)
    return [row[:total].tolist() for row, total in zip(ratios, totals, strict=True)]


def compare(
    rng: np.random.Generator, rule: Stein, cv: float, changes: npt.NDArray[np.float64], drift: float
) -> npt.NDArray[np.float64]:
    """ratio_between of now over before for each true change, the floor assumed: rows of centre, low, high."""
    before = stein_runs(rng, rule, cv, np.full(len(changes), SPEEDUP), drift)
    now = stein_runs(rng, rule, cv, SPEEDUP * changes, drift)
    found = [ratio_between(b, n, firsts=(rule.first, rule.first), drift=FLOORS[rule]) for b, n in zip(before, now, strict=True)]
    return np.array([f or (math.nan,) * 3 for f in found])


def test_the_simulated_runs_take_steins_own_counts():
    rng = np.random.default_rng(0)
    for run in stein_runs(rng, GPU, 0.08, np.full(200, SPEEDUP), 0.0):
        assert len(run) == GPU.total(run[: GPU.first])


@pytest.mark.parametrize("cv", [0.005, 0.01, 0.03])
def test_an_unchanged_gpu_pair_moving_6_percent_between_runs_is_flagged_at_most_5_percent_at_every_cv(cv):
    """Issue 56 §4. Before, on a 3 % floor: 5.42 ± 0.23 % at CV 1 % (the review), 5.65 % in the limit; 5.56 / 5.69 /
    4.75 % at CV 0.5 / 1 / 3 % (20,000 draws). As the runs' own spread vanishes the interval is the floor's alone, so
    the floor sets the limit: Φ(-(-ln 0.95 + 1.96 sqrt(2) floor) / (sqrt(2) 6 %)), 4.63 % at 3.3 %; here 4.35 / 4.26 /
    4.27 % (12,000 draws a CV). Higher CVs widen the interval further (2.5 % at 8 %, 1.0 % at 15 %, 20,000 draws)."""
    rng = np.random.default_rng(int(cv * 1000))
    floor = GPU_FLOOR
    limit = 0.5 * math.erfc((-math.log(1 - TOLERANCE) + 1.96 * math.sqrt(2) * floor) / (math.sqrt(2) * 0.06) / math.sqrt(2))
    assert limit <= 0.05
    runs = 12_000
    flagged = float(np.mean(compare(rng, GPU, cv, np.ones(runs), 0.06)[:, 2] < 1 - TOLERANCE))
    assert flagged <= 0.05, f"CV {cv}: {flagged:.2%} of unchanged pairs flagged (the limit {limit:.2%})"


def test_the_interval_holds_the_change_where_the_pair_moves_no_more_than_the_floor_its_caption_names():
    """What the caption claims (issue 56 §4): the interval covers each run's noise and a run-to-run spread up to the
    floor. A GPU pair moving by its 3.3 % floor is covered 0.954 / 0.957 / 0.966 / 0.980 of the time at CV 1 / 3 / 8 /
    15 % (6,000 draws); one moving 6 %, beyond it, only 0.73 / 0.76 / 0.84 / 0.93 (the review: 0.72-0.93), which the
    caption now says rather than "allows for the pair's run-to-run variation"."""
    rng = np.random.default_rng(33)
    found = compare(rng, GPU, 0.01, np.ones(6000), GPU_FLOOR)
    held = float(np.mean((found[:, 1] <= 1) & (found[:, 2] >= 1)))
    assert held >= 0.95 - 2 * math.sqrt(0.05 * 0.95 / 6000), held


def test_the_floors_cost_is_power_at_a_real_drop():
    """A steady GPU pair's true 15 % drop at CV 3 % is flagged 0.69 of the time on the 3.3 % floor (0.79 on 3 %)."""
    rng = np.random.default_rng(15)
    power = float(np.mean(compare(rng, GPU, 0.03, np.full(3000, 0.85), 0.0)[:, 2] < 1 - TOLERANCE))
    assert 0.6 <= power <= 0.75, power


@pytest.mark.parametrize(
    ("rule", "cv"), [(GPU, 0.03), (GPU, 0.15), (CPU, 0.03), (CPU, 0.15)], ids=["gpu-3", "gpu-15", "cpu-3", "cpu-15"]
)
def test_a_fresh_comparison_at_the_widened_half_width_is_flagged_about_half_the_time_on_average(rule, cv):
    """Issue 56 §5. A drop is printed beside a flag, so from a flagged comparison's interval, and flagged ones are the
    narrower: read from the half-width as it stands, a fresh comparison at the printed drop was flagged 0.41-0.50 of
    the time (the review); here 0.50 / 0.45 / 0.52 / 0.43 (GPU CV 3 / 15 %, CPU CV 3 / 15 %, a true 20 % drop, the pair
    moving by its floor, 6,000 comparisons a cell). Widened by DETECTABLE_WIDENING, 0.62 / 0.57 / 0.62 / 0.54: at least
    half the time on average over comparisons, though not for each figure printed (issue 63 item 5). The printed drop
    is now never under the plan's least, which keeps the promise for each figure up to CV 15 %
    (tests/kernel/test_detectable_drop.py); the widened half-width, tested here, speaks only where it is larger."""
    rng = np.random.default_rng(int(cv * 100) + rule.most)
    floor = FLOORS[rule]
    first = compare(rng, rule, cv, np.full(6000, 0.8), floor)
    flagged = first[first[:, 2] < 1 - TOLERANCE]
    printed = np.array([detectable_drop(row[1:], TOLERANCE, least=0.0) for row in flagged])
    plain = 1 - (1 - TOLERANCE) * np.sqrt(flagged[:, 1] / flagged[:, 2])  # the half-width as it stands
    rates = {}
    for name, drops in (("now", printed), ("before", plain)):
        fresh = compare(rng, rule, cv, 1 - drops, floor)
        rates[name] = float(np.mean(fresh[:, 2] < 1 - TOLERANCE))
    said = f"{rule.most} pairs at most, CV {cv}: {len(flagged)} flags, fresh flagged {rates}"
    assert 0.5 <= rates["now"] <= 0.68, said
    assert rates["before"] < rates["now"], said
