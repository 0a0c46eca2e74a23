"""Issue 56 §3: AL's interval over prompts where output lengths are lognormal (log sd 1) and strongly tied to acceptance
(simulation, workers.prompt_intervals.ratio_intervals on thousands of certifications at once, no engine).

Each prompt's acceptance probability is drawn from a Beta and its output length is lognormal, median 32 tokens and
log sd 1, correlated with it through a Gaussian copula (`tie` is the latent correlation; the measured correlation
between log length and acceptance is within 0.02 of it). It drafts k = 4 tokens a step until it has its tokens. The
truth is the AL of a fixed population of such prompts, exact; each certification draws `n` of them.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt
import pytest

from workers import prompt_intervals

K, SIGMA, POPULATION, CERTIFICATIONS = 4, 1.0, 20_000, 2000
Counts = npt.NDArray[np.float64]


@functools.lru_cache(maxsize=8)
def population(tie: float, alpha: float, beta: float, shift: float = 1.0) -> tuple[Counts, Counts]:
    """Each prompt's drafting steps and accepted tokens; the longer prompts are the better accepted, by `tie`. Another
    `shift` gives the same prompts (the same lengths) in a mode whose acceptance is `shift` times as high."""
    rng = np.random.default_rng([int(100 * tie), int(alpha), int(beta)])
    latent = rng.standard_normal(POPULATION)
    p = np.minimum(shift * np.sort(rng.beta(alpha, beta, POPULATION))[np.argsort(np.argsort(latent))], 1 - 1e-9)
    logs = SIGMA * (tie * latent + math.sqrt(1 - tie * tie) * rng.standard_normal(POPULATION))
    tokens = np.maximum(2, np.round(32 * np.exp(logs))).astype(np.int64)
    drafts, accepted = np.zeros(POPULATION), np.zeros(POPULATION)
    for chunk in np.array_split(np.argsort(tokens), 16):  # alike lengths together: each chunk a matrix of steps
        width = int(tokens[chunk].max())
        runs = np.minimum(rng.geometric(1 - p[chunk, None], (len(chunk), width)) - 1, K)  # each step's accepted run
        steps = (np.cumsum(runs + 1, axis=1) < tokens[chunk, None]).sum(axis=1) + 1  # a step makes its run and one more
        drafts[chunk] = steps
        accepted[chunk] = np.where(np.arange(width) < steps[:, None], runs, 0).sum(axis=1)
    return drafts, accepted


def coverage(tie: float, alpha: float, beta: float, n: int) -> tuple[float, float, float]:
    """The share of published intervals that hold the population's AL, the share published, and their median width."""
    drafts, accepted = population(tie, alpha, beta)
    truth = 1 + accepted.sum() / drafts.sum()
    drawn = np.random.default_rng([n, int(100 * tie), int(alpha)]).integers(0, POPULATION, (CERTIFICATIONS, n))
    low, high = prompt_intervals.ratio_intervals(drafts[drawn], accepted[drawn])
    published = ~np.isnan(low)
    held = (1 + low[published] <= truth) & (truth <= 1 + high[published])
    return float(held.mean()), float(published.mean()), float(np.median(high[published] - low[published]))


@pytest.mark.parametrize("n", [28, 64, 128, 256])
@pytest.mark.parametrize(("alpha", "beta"), [(2, 6), (3, 3), (6, 2)])
@pytest.mark.parametrize("tie", [0.7, 0.9])
def test_with_lengths_tied_hard_to_acceptance_the_interval_holds_the_al_where_published_simulated(
    tie, alpha, beta, n, monkeypatch
):
    """Before (the jackknife's t on a third of the effective number, symmetric): 0.926 at 64 prompts and 0.927 at 128
    with a tie of 0.7, 0.910-0.935 at 0.9, the misses under the truth 5-8 % of the time (the review). Here (2,000
    certifications a cell): 0.910-0.938 with Beta(2, 6) acceptance, 0.930-0.972 over all cells. Now, the upper end
    skew-corrected: 0.957-0.980 over all cells, published in 99.5-100 % of certifications, 1.09-1.60 times as wide
    (the most at 28 prompts of low acceptance). Since issue 63 §4 the low end takes the term for left skew too: here
    every cell's coverage is as it was to the third decimal (0.956-0.983 with this numpy), at most 1 % wider."""
    now, published, width = coverage(tie, alpha, beta, n)
    monkeypatch.setattr(prompt_intervals, "SKEW_WEIGHT", 0.0)
    monkeypatch.setattr(prompt_intervals, "PLAIN_SKEW_WEIGHT", 0.0)  # the low end's, since issue 63 §4
    before, _, narrower = coverage(tie, alpha, beta, n)
    said = f"tie {tie}, Beta({alpha}, {beta}), {n} prompts: {now:.3f} of {published:.1%} published (before {before:.3f})"
    assert now >= 0.94, said
    assert published >= 0.99, said  # from 28 prompts the weights nearly always carry one
    assert before <= now and width >= narrower, said  # the skew term only ever widens the upper end
    if (tie, alpha) == (0.9, 2):
        assert before < 0.94, said  # the defect: low acceptance, tied hardest


def paired_coverage(shift: float, n: int, runs: int = 1000) -> tuple[float, float]:
    """The share of paired intervals (AL at acceptance x1 less AL at x`shift`, on the same prompts, tie 0.9, Beta(2, 6))
    that hold the population's difference, and the share of misses that fell on the side the skew term widens."""
    (drafts, accepted), (drafts_b, accepted_b) = population(0.9, 2, 6), population(0.9, 2, 6, shift)
    truth = accepted.sum() / drafts.sum() - accepted_b.sum() / drafts_b.sum()
    rng, held, toward = np.random.default_rng([n, int(10 * shift)]), 0, 0
    for _ in range(runs):
        drawn = rng.integers(0, POPULATION, n)
        pairs = [values[drawn].astype(np.int64).tolist() for values in (drafts, drafts_b, accepted, accepted_b)]
        found = prompt_intervals.difference_interval((pairs[0], pairs[1]), (pairs[2], pairs[3]))
        assert found is not None
        held += found[0] <= truth <= found[1]
        toward += (found[1] < truth) if shift < 1 else (found[0] > truth)
    return held / runs, toward / max(1, runs - held)


@pytest.mark.parametrize("shift", [0.7, 1.3])
def test_the_paired_difference_between_modes_is_skew_corrected_on_the_side_its_misses_fell_simulated(shift, monkeypatch):
    """Before (difference_interval symmetric, 600 runs a cell, 28-256 prompts, ties 0.7-0.9, three Betas, shifts 0.7
    and 1.3): 0.907-0.981, the misses on the side of the difference's sign. Now, the skew term on the side the
    influence leans to: 0.942-0.985. Here, the hardest cell (tie 0.9, Beta(2, 6), 64 prompts, 1,000 runs): before
    0.888 and 0.919, now 0.941 and 0.951 (each ±0.015 at 95 %). Since issue 63 §4 the term weighs 3, not 1.5
    (PLAIN_SKEW_WEIGHT): before 0.893 and 0.921 with this numpy, 0.947 and 0.953 at 1.5, now 0.966 and 0.973."""
    now, _ = paired_coverage(shift, 64)
    monkeypatch.setattr(prompt_intervals, "PLAIN_SKEW_WEIGHT", 0.0)  # a paired difference's weight, since issue 63 §4
    before, lopsided = paired_coverage(shift, 64)
    assert before < 0.925 and now >= 0.935 and now - before >= 0.02, (now, before)
    assert lopsided > 0.85, lopsided  # the symmetric interval's misses were one-sided: the term widens that side
