"""AL's interval over prompts keeps its coverage (simulation, no engine), and vLLM's per-request histogram
reads as the counters it sums to (constructed).

Each simulated prompt has its own acceptance probability (drawn from a Beta, so prompts differ as categories
do: AL 1.3 to 3 on average), and drafts k = 4 tokens per step until it has 32 tokens. The truth is the AL of
a fixed population of such prompts, exact; each certification draws `n` of them.
"""

from __future__ import annotations

import math
import random
import statistics
from types import SimpleNamespace

import pytest

from kernel.live import rate_interval
from kernel.stats import t_quantile
from workers import metrics, prompt_intervals
from workers.engines.base import SpecCounters
from workers.engines.vllm import _request_counters

K, TOKENS, POPULATION, CERTIFICATIONS = 4, 32, 4000, 2000


def prompt(rng: random.Random, p: float, tokens: int = TOKENS) -> tuple[int, int]:
    """One prompt's drafting steps and accepted tokens: each step accepts a run of successes, at most K."""
    drafts = accepted = produced = 0
    while produced < tokens:
        run = 0
        while run < K and rng.random() < p:
            run += 1
        drafts, accepted, produced = drafts + 1, accepted + run, produced + run + 1
    return drafts, accepted


@pytest.mark.parametrize(("alpha", "beta"), [(6, 2), (3, 3), (2, 6)])
@pytest.mark.parametrize("n", [12, 28, 64])
def test_the_interval_over_prompts_holds_the_populations_al_simulated(alpha, beta, n):
    """At 12 prompts, the fewest it is published from since issue 63 §4, it held 0.994-0.996, published in every
    certification."""
    rng = random.Random(f"al-{alpha}-{beta}-{n}")
    population = [prompt(rng, rng.betavariate(alpha, beta)) for _ in range(POPULATION)]
    truth = 1 + sum(a for _, a in population) / sum(d for d, _ in population)
    covered = []
    for _ in range(CERTIFICATIONS):
        drawn = rng.choices(population, k=n)
        interval = prompt_intervals.acceptance_interval([d for d, _ in drawn], [a for _, a in drawn])
        if interval is not None:  # published: enough prompts, and enough effective ones
            covered.append(interval[0] <= truth <= interval[1])
    coverage = statistics.fmean(covered)
    assert coverage >= 0.94, f"{n} prompts: the 95 % interval held AL {truth:.3f} {coverage:.3f}"
    assert len(covered) >= 0.99 * CERTIFICATIONS  # equal lengths: prompts weigh about alike, so it is published


def test_prompts_that_weigh_as_fewer_than_six_get_no_interval_and_say_what_they_weigh_constructed():
    """Twelve prompts, enough in number, one of which drafted 100 steps and the others 5 each: they weigh as
    (155)² / 10,275 = 2.3."""
    long, short = SpecCounters(drafts=100, draft_tokens=400, accepted=300), SpecCounters(drafts=5, draft_tokens=20, accepted=5)
    prompts = [long, *[short] * 11]
    assert len(prompts) >= prompt_intervals.MIN_PROMPTS_FOR_INTERVAL  # it is their weight that withholds it
    found = metrics.acceptance(sum(prompts, SpecCounters()), prompts)
    assert found["prompts"] == 12 and found["prompts_effective"] == 2.3
    assert "mean_acceptance_length_interval" not in found
    even = [SpecCounters(drafts=10 + i, draft_tokens=40 + 4 * i, accepted=20 + i) for i in range(12)]
    assert "mean_acceptance_length_interval" in metrics.acceptance(sum(even, SpecCounters()), even)


def test_fewer_prompts_than_the_minimum_get_no_interval_but_say_how_many():
    one = SpecCounters(drafts=10, draft_tokens=40, accepted=20, per_position=(8, 6, 4, 2))
    few = prompt_intervals.MIN_PROMPTS_FOR_INTERVAL - 1
    prompts = [one] * few
    total = sum(prompts, SpecCounters())
    found = metrics.acceptance(total, prompts)
    assert found["prompts"] == few and "mean_acceptance_length_interval" not in found
    assert "prompts" not in metrics.acceptance(total)  # an engine without per-request counters: the old figures alone
    enough = metrics.acceptance(total + one, [*prompts, one])  # one prompt more: the minimum
    assert enough["mean_acceptance_length_interval"] == [3.0, 3.0]  # identical prompts: no spread


def test_a_request_histogram_reads_as_the_counters_it_sums_to_constructed():
    # Five drafting steps of k = 4 accepted 0, 4, 2, 2 and 1 tokens.
    histogram = SimpleNamespace(histogram=[1, 1, 2, 0, 1], num_draft_tokens=20)
    assert _request_counters(histogram) == SpecCounters(drafts=5, draft_tokens=20, accepted=9, per_position=(4, 3, 1, 1))
    assert _request_counters(None) is None


def tied_population(rng: random.Random, alpha: float, beta: float) -> list[tuple[int, int]]:
    """Prompts whose output lengths are lognormal (median 32 tokens, sigma 1) and longer where acceptance is
    higher, as real traffic's are (issue 39 §6): the heavy prompts are the well-accepted ones."""
    found = []
    for _ in range(POPULATION):
        p = rng.betavariate(alpha, beta)
        tokens = max(2, round(32 * math.exp(0.7 * 4 * (p - 0.5) + math.sqrt(1 - 0.7**2) * rng.gauss(0, 1))))
        found.append(prompt(rng, p, tokens))
    return found


def linearised(drafts: list[int], accepted: list[int]) -> tuple[float, float]:
    """The interval before issue 39: the ratio's linearised error, t on n - 1."""
    n, ratio = len(drafts), sum(accepted) / sum(drafts)
    spread = math.sqrt(sum((a - ratio * d) ** 2 for a, d in zip(accepted, drafts, strict=True)) / (n - 1) / n)
    half = t_quantile(0.975, n - 1) * spread / statistics.fmean(drafts)
    return 1 + ratio - half, 1 + ratio + half


@pytest.mark.parametrize(("alpha", "beta"), [(6, 2), (3, 3), (2, 6)])
@pytest.mark.parametrize("n", [12, 28, 64])
def test_with_lognormal_lengths_tied_to_acceptance_the_interval_holds_the_al_simulated(alpha, beta, n):
    """Issue 39 §6: at least 0.94 at every prompt count it is published from; on the effective number less one the
    jackknife held 0.929-0.939 at 28-64 prompts where acceptance is low (the hole a third of it closes). At 12 prompts,
    the fewest it is published from since issue 63 §4, it held 0.992-0.997, published in 91-94 % of certifications
    (the linearised interval 0.871-0.907); at 8 it had held 0.985-0.991, published in 39-46 %."""
    rng = random.Random(f"tied-{alpha}-{beta}-{n}")
    population = tied_population(rng, alpha, beta)
    truth = 1 + sum(a for _, a in population) / sum(d for d, _ in population)
    now, before = [], []
    for _ in range(1500):
        drawn = rng.choices(population, k=n)
        drafts, accepted = [d for d, _ in drawn], [a for _, a in drawn]
        interval = prompt_intervals.acceptance_interval(drafts, accepted)
        low, high = linearised(drafts, accepted)
        before.append(low <= truth <= high)
        if interval is not None:  # where a few long prompts weigh as fewer than 6, none is published
            now.append(interval[0] <= truth <= interval[1])
    coverage = statistics.fmean(now)
    said = f"{n} prompts: held AL {truth:.3f} {coverage:.3f} of {len(now)} published (linearised: {statistics.fmean(before):.3f})"
    assert coverage >= 0.94, said
    assert coverage >= statistics.fmean(before)  # the linearised t interval under-covered here
    # From 28 prompts it is published nearly always; at 12 a few long prompts still weigh as fewer than 6 at times.
    assert len(now) >= (0.9 if n >= 28 else 0.85) * 1500, said


POSITION_RUNS = 500  # certifications a cell: coverage to about ±0.01, in about a second


def positions(rng: random.Random, p: float, tokens: int) -> SpecCounters:
    """One prompt's counters with its per-position counts: a step that accepted a run of j reached positions 1..j."""
    drafts = produced = 0
    reached = [0] * K
    while produced < tokens:
        run = 0
        while run < K and rng.random() < p:
            run += 1
        for position in range(run):
            reached[position] += 1
        drafts, produced = drafts + 1, produced + run + 1
    return SpecCounters(drafts=drafts, draft_tokens=K * drafts, accepted=sum(reached), per_position=tuple(reached))


@pytest.mark.parametrize("lengths", ["equal", "lognormal"])
@pytest.mark.parametrize("n", [32, 64])
def test_each_positions_interval_over_prompts_holds_the_populations_rate_where_wilsons_did_not_simulated(n, lengths):
    """Issue 56 §2. Before: Wilson's interval over drafting steps held each position's population rate in 0.66-0.77
    of runs at 32 prompts of 32 tokens and 0.26-0.31 with lognormal lengths (steps within a prompt are not
    independent). The interval over prompts, as AL's, holds it in at least 0.94 wherever it is published."""
    rng = random.Random(f"positions-{n}-{lengths}")
    population = []
    for _ in range(POPULATION):
        p = rng.betavariate(3, 3)
        tokens = TOKENS if lengths == "equal" else max(2, round(32 * math.exp(rng.gauss(0, 0.82))))
        population.append(positions(rng, p, tokens))
    steps = sum(c.drafts for c in population)
    truth = [sum(c.per_position[i] for c in population) / steps for i in range(K)]
    now, wilson = [], []
    for _ in range(POSITION_RUNS):
        drawn = rng.choices(population, k=n)
        total = sum(drawn, SpecCounters(per_position=(0,) * K))
        intervals = prompt_intervals.position_intervals(total, drawn)
        wilson += [low <= t <= high for t, (low, high) in
                   zip(truth, (rate_interval(c, total.drafts) or (0, 1) for c in total.per_position), strict=True)]  # fmt: skip
        if intervals:
            now += [low <= t <= high for t, (low, high) in zip(truth, intervals, strict=True)]
    coverage, before = statistics.fmean(now), statistics.fmean(wilson)
    assert coverage >= 0.94, f"{n} prompts, {lengths} lengths: {coverage:.3f} over prompts (Wilson's {before:.3f})"
    assert before < 0.9 and len(now) >= 0.9 * POSITION_RUNS * K  # Wilson's under-covered here; the new one is published
