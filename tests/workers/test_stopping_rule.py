"""Measuring to a precision: Stein's two-stage rule keeps its interval's coverage (simulation, no engine).

Each simulated certification times pairs of blocks in a random order (as timing.paired_blocks does) on a
machine whose speed drifts slowly and now and then stalls one block, with lognormal block noise; the rule (the
code the throughput stage runs) picks how many pairs, and the interval must hold the true speedup.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from kernel import result
from kernel.result import MARGIN
from kernel.spec import CPU_MOST_PAIRS, GPU_MOST_PAIRS
from workers import metrics

TRUE_SPEEDUP = 1.0
CERTIFICATIONS = 2000
RULE = metrics.Stein(first=4, most=12, target=0.05)


def pair_ratios(
    rng: random.Random, cv: float, count: int, stalls: float = 0.03, rho: float = 0.0, *, drift: bool = True,
    abba: bool = False,
) -> list[float]:  # fmt: skip
    """`count` paired ratios (B over A tok/s) from pairs of blocks in a random order, as timing.paired_blocks runs them
    (or in a fixed A B B A with `abba`), on a drifting, stalling machine; `rho` makes each block's noise an AR(1) of
    the one before (load that lingers from block to block)."""
    slope = rng.gauss(0, 0.01) if drift else 0.0  # the machine's speed changes by about 1 % per block, one way all run
    ratios, noise = [], rng.gauss(0, cv / math.sqrt(2))
    for pair in range(count):
        baseline_first = pair % 2 == 0 if abba else rng.random() < 0.5
        order = ("A", "B") if baseline_first else ("B", "A")
        speed = {}
        for position, side in enumerate(order):
            block = 2 * pair + position
            stall = 0.75 if rng.random() < stalls else 1.0  # an occasional block that another process slowed
            noise = rho * noise + math.sqrt(1 - rho * rho) * rng.gauss(0, cv / math.sqrt(2))
            speed[side] = math.exp(slope * block + noise) * stall * (TRUE_SPEEDUP if side == "B" else 1.0)
        ratios.append(speed["B"] / speed["A"])
    return ratios


def stein_certification(
    rng: random.Random, cv: float, stalls: float = 0.03, rule: metrics.Stein = RULE, rho: float = 0.0
) -> tuple[bool, int, float]:
    """One level measured as the throughput stage measures it: first stage, the rule's total, the interval."""
    ratios = pair_ratios(rng, cv, rule.most, stalls, rho)  # drawn in time order; the rule reads only the first `total`
    total = rule.total(ratios[: rule.first])
    _, low, high, half = rule.interval(ratios[:total])
    return low <= TRUE_SPEEDUP <= high, total, half


def naive_certification(rng: random.Random, cv: float) -> bool:
    """Add pairs until the running t interval is narrow enough: the rule issue 24 measured and refused."""
    ratios = pair_ratios(rng, cv, RULE.most)
    for count in range(3, RULE.most + 1):
        _, low, high = metrics.paired_ratio(ratios[:count])
        if math.log(high / low) / 2 <= math.log1p(RULE.target):
            break
    return low <= TRUE_SPEEDUP <= high


@pytest.mark.parametrize("most", [CPU_MOST_PAIRS, GPU_MOST_PAIRS])
@pytest.mark.parametrize("cv", [0.03, 0.08, 0.15, 0.20])
def test_steins_rule_keeps_95_percent_coverage_with_drift_and_stalls_simulated(cv, most):
    """With either class's cap: the cap costs precision, never coverage."""
    rng = random.Random(f"stein-{cv}-{most}")
    rule = metrics.Stein(first=RULE.first, most=most, target=RULE.target)
    runs = [stein_certification(rng, cv, rule=rule) for _ in range(CERTIFICATIONS)]
    coverage = statistics.fmean(covered for covered, _, _ in runs)
    assert coverage >= 0.94, f"CV {cv}: the 95 % intervals held the true speedup in {coverage:.3f} of {CERTIFICATIONS}"


AR1_RUNS = 10_000


def ar1_coverage(seed: str, cv: float, most: int, *, drift: bool, abba: bool) -> tuple[float, float]:
    """Pure AR(1) block noise, rho 0.5, no stalls: (the interval's coverage, how often a true 1.03x reads "faster")."""
    rng, rule = random.Random(seed), metrics.Stein(first=RULE.first, most=most, target=RULE.target)
    covered = faster = 0
    for _ in range(AR1_RUNS):
        ratios = pair_ratios(rng, cv, most, stalls=0.0, rho=0.5, drift=drift, abba=abba)
        _, low, high, _ = rule.interval(ratios[: rule.total(ratios[: rule.first])])
        covered += low <= TRUE_SPEEDUP <= high
        faster += result.speed_label([low * MARGIN, high * MARGIN]) == result.FASTER  # the same noise around 1.03
    return covered / AR1_RUNS, faster / AR1_RUNS


@pytest.mark.parametrize("most", [CPU_MOST_PAIRS, GPU_MOST_PAIRS])
@pytest.mark.parametrize("drift", [False, True], ids=["no-drift", "drift"])
@pytest.mark.parametrize("cv", [0.03, 0.08])
def test_a_random_order_keeps_coverage_under_load_that_lingers_from_block_to_block_simulated(cv, drift, most):
    """AR(1) rho 0.5 (issue 39 §4): in a fixed A B B A neighbouring pairs' log ratios correlate (+0.125), which the
    interval does not see: it covered 0.937 at CV 3 %. A random order per pair leaves them uncorrelated."""
    coverage, faster = ar1_coverage(f"ar1-{cv}-{drift}-{most}", cv, most, drift=drift, abba=False)
    assert coverage >= 0.945, f"CV {cv}, drift {drift}, cap {most}: coverage {coverage:.4f}"
    assert faster <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / AR1_RUNS), f"a true 1.03x read faster in {faster:.4f}"


def test_a_fixed_a_b_b_a_order_under_lingering_load_loses_coverage_simulated():
    """The hole the random order closes, kept visible: if this passes no more, the test above proves nothing new."""
    coverage, _ = ar1_coverage("ar1-abba", 0.03, CPU_MOST_PAIRS, drift=False, abba=True)
    assert coverage < 0.943, f"A B B A covered {coverage:.4f}"


@pytest.mark.parametrize(("cv", "pairs", "precise"), [(0.02, 4.6, 0.95), (0.05, 9.5, 0.4), (0.15, 11.5, 0.02)])
def test_the_rule_spends_pairs_where_the_data_is_noisy_simulated(cv, pairs, precise):
    """Ratio CV 2 %: the first stage is enough and precise; 15 %: the cap, and 'precision not reached'."""
    rng = random.Random(f"spend-{cv}")
    runs = [stein_certification(rng, cv, stalls=0.0) for _ in range(CERTIFICATIONS)]
    spent = statistics.fmean(total for _, total, _ in runs)
    reached = statistics.fmean(half <= RULE.target for _, _, half in runs)
    assert statistics.fmean(covered for covered, _, _ in runs) >= 0.94
    assert spent <= pairs if cv < 0.1 else spent >= pairs, f"CV {cv}: {spent:.1f} pairs on average"
    assert reached >= precise if cv < 0.1 else reached <= precise, f"CV {cv}: {reached:.3f} reached the target"


def test_the_naive_rule_loses_coverage_that_steins_keeps_simulated():
    rng = random.Random("naive")
    naive = statistics.fmean(naive_certification(rng, 0.08) for _ in range(CERTIFICATIONS))
    assert naive < 0.93, f"naive stopping covered {naive:.3f}: this simulation no longer shows why Stein's rule is used"


def test_the_rule_takes_whole_quadruples_up_to_its_cap_constructed():
    assert RULE.total([1.50, 1.51, 1.49, 1.50]) == 4  # 1 % spread: the first stage is enough
    spread = [1.0, 1.1, 0.9, 1.05]  # about 8 %: more pairs, an even number, at most 12
    total = RULE.total(spread)
    assert total % 2 == 0 and 4 < total <= 12
    assert RULE.total([1.0, 1.5, 0.7, 1.3]) == 12
    centre, _, high, half = RULE.interval([1.0, 1.1, 0.9, 1.05, 1.0, 1.0])
    logs = [math.log(r) for r in (1.0, 1.1, 0.9, 1.05, 1.0, 1.0)]
    expected = 3.182 * statistics.stdev(logs[:4]) / math.sqrt(6)  # t(3) from the first stage, over all 6
    assert math.log(high / centre) == pytest.approx(expected) and half == pytest.approx(math.expm1(expected))


PROMPTS = 8


def quadruple_ratios(rng: random.Random, cv: float, count: int, spread: float, stalls: float = 0.03) -> list[float]:
    """`count` c=1 units as workers/quadruples.py times them: unit i is prompt i mod 8, whose own true speedup is
    a fixed effect (log spread `spread`, the set's geometric mean TRUE_SPEEDUP); each request's speed carries
    lognormal noise, the machine's drift, AR(1) memory from request to request and an occasional stall; the four
    requests run A B B A or B A A B by a fair coin, and the unit's ratio is B's tok/s over A's, two requests a side."""
    effects = [rng.gauss(0, spread) for _ in range(PROMPTS)]
    effects = [e - statistics.fmean(effects) for e in effects]  # the set's mean is the truth
    slope, noise, ratios = rng.gauss(0, 0.003), 0.0, []
    for unit in range(count):
        order = ("A", "B", "B", "A") if rng.random() < 0.5 else ("B", "A", "A", "B")
        seconds = {"A": 0.0, "B": 0.0}
        for position, side in enumerate(order):
            noise = 0.5 * noise + math.sqrt(0.75) * rng.gauss(0, cv)
            stall = 0.75 if rng.random() < stalls else 1.0
            gain = math.exp(effects[unit % PROMPTS]) * TRUE_SPEEDUP if side == "B" else 1.0
            seconds[side] += 1 / (math.exp(slope * (4 * unit + position) + noise) * stall * gain)
        ratios.append(seconds["A"] / seconds["B"])
    return ratios


@pytest.mark.parametrize("most", [24, 48])
@pytest.mark.parametrize("spread", [0.0, 0.3])
@pytest.mark.parametrize("cv", [0.02, 0.05, 0.10])
def test_the_prompt_rule_keeps_coverage_for_quadruples_whatever_the_prompts_own_speedups_simulated(cv, spread, most):
    """c=1's quadruples (issue 38 §2): the spread about each prompt's own mean, prompts x (rounds - 1) dof, keeps the
    interval's coverage of the prompt set's speedup, with prompts whose own speedups differ by 30 % or not at all."""
    rng = random.Random(f"prompt-stein-{cv}-{spread}-{most}")
    rule = metrics.PromptStein(first=2 * PROMPTS, most=most, target=0.05, prompts=PROMPTS)
    covered = []
    for _ in range(CERTIFICATIONS):
        ratios = quadruple_ratios(rng, cv, most, spread)
        total = rule.total(ratios[: rule.first])
        assert total % PROMPTS == 0 and rule.first <= total <= most
        _, low, high, _ = rule.interval(ratios[:total])
        covered.append(low <= TRUE_SPEEDUP <= high)
    coverage = statistics.fmean(covered)
    assert coverage >= 0.94, f"CV {cv}, prompt spread {spread}: coverage {coverage:.3f}"


def test_the_prompt_rule_reads_the_spread_about_each_prompts_mean_constructed():
    """Two prompts, two rounds: a prompt's own speedup (2x against 1x) is no spread; what is left is."""
    rule = metrics.PromptStein(first=4, most=8, target=0.05, prompts=2)
    ratios = [2.0 * 1.01, 1.0 * 1.01, 2.0 / 1.01, 1.0 / 1.01]
    assert rule.spread(ratios) == pytest.approx(math.sqrt(4 * math.log(1.01) ** 2 / 2))
    centre, _, high, _ = rule.interval(ratios)
    assert centre == pytest.approx(math.sqrt(2.0))
    assert math.log(high / centre) == pytest.approx(4.303 * rule.spread(ratios) / 2)  # t(2): 4 units less 2 prompts
    assert rule.total(ratios) == 4  # ±1 % about each prompt: the first stage is enough
    assert rule.total([2.4, 1.0, 1.6, 1.3]) == 8  # wide: the cap, in whole rounds
