"""`python -m workers certify --dry-run`: the plan and its cost on paper, per hardware class (workers/cost.py)."""

from __future__ import annotations

import math

import pytest

from kernel.spec import CPU_LEVELS, GPU_LEVELS, Plan
from kernel.stats import t_975
from workers import cost
from workers.__main__ import main


@pytest.mark.parametrize(("hardware", "levels", "most"), [("cpu", CPU_LEVELS, 6), ("h100", GPU_LEVELS, 12)])
def test_the_dry_run_prints_each_classs_plan_and_estimate_and_runs_nothing(capsys, hardware, levels, most):
    assert main(["certify", "--dry-run", "--hardware", hardware]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"plan on {hardware}: levels {', '.join(map(str, levels))} and a Poisson point")
    assert f"at most {most};" in out[0]
    rows = [line.split() for line in out[2 : 2 + len(levels) + 1]]
    assert [row[0] for row in rows] == [*(f"c={c}" for c in levels), "Poisson"]
    estimate = next(line for line in out if line.startswith("estimate:"))
    assert ("GPU-minutes" in estimate) == (hardware != "cpu") and "qualification once per engine build" in estimate
    assert any(line.startswith("assumptions:") for line in out)
    # The starts it plans, counted as a run's document lists them (tests/workers/test_serving_real.py holds a real
    # run's list to the same plan): the reference engine, two servers twice (published, smoke), and on one GPU the two
    # offline engines that hold the card before the servers; on CPU the published servers give their figures.
    starts = next(line for line in out if line.startswith("starts, as a run's document lists them:"))
    assert "1 reference engine" in starts and "4 vLLM servers" in starts, starts
    assert ("2 offline vLLM engines" in starts) == (hardware != "cpu") and ("offline" in starts) == (hardware != "cpu")


@pytest.mark.parametrize(
    ("hardware", "planned"), [("cpu", ["server", "server"]), ("h100", ["engine", "engine", "server", "server"])]
)
def test_a_plan_without_the_reference_check_or_the_smoke_tiers_features_plans_fewer_starts(hardware, planned):
    kinds = [start["kind"] for start in cost.planned_starts(Plan(reference_check=False, smoke_engine_features=()), hardware)]
    assert kinds == planned


def test_an_unknown_hardware_class_is_refused_with_the_known_ones(capsys):
    assert main(["certify", "--dry-run", "--hardware", "tpu"]) == 1
    assert "No cost model for hardware 'tpu'; known: cpu, h100" in capsys.readouterr().err


def test_the_expected_pairs_are_steins_for_the_classs_spread_and_the_cost_adds_up():
    plan = Plan(concurrency=(1, 4), most_pairs=12)
    quiet, noisy = cost.expected_pairs(plan, 0.01, lowest=True), cost.expected_pairs(plan, 0.17, lowest=True)
    assert quiet == plan.repeats and noisy == plan.most_pairs  # a clean first stage stops there; a noisy one is capped
    # At a CV of 3 %: (t(3) · 0.03 / log 1.05)² = 3.8, so the first stage's four pairs suffice at ±5 %.
    assert math.ceil((t_975(3) * 0.03 / math.log1p(0.05)) ** 2) <= 4 == cost.expected_pairs(plan, 0.03, lowest=True)
    found = cost.estimate(plan, "h100")
    parts = found.costs.offline + found.costs.server_start + found.costs.smoke + sum(level.seconds for level in found.levels)
    assert found.costs.gpus  # on one GPU the servers start after the offline stages, not beside them
    assert found.wall_seconds == pytest.approx(parts) and found.gpu_minutes == pytest.approx(found.wall_seconds / 60)
    assert cost.estimate(Plan(concurrency=(1, 4), most_pairs=6), "cpu").wall_seconds < cost.estimate(plan, "cpu").wall_seconds
    on_cpu = cost.estimate(plan, "cpu")  # the offline stages measure on the servers once they answer: one after the other
    levels = sum(level.seconds for level in on_cpu.levels)
    assert on_cpu.wall_seconds == pytest.approx(on_cpu.costs.offline + on_cpu.costs.server_start + on_cpu.costs.smoke + levels)
