"""The figures a certification reports, as pure functions of what the engines returned."""

from __future__ import annotations

import functools
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kernel.result import Acceptance, AtK, AtLength, AtTemperature, ChiSquare, Divergence, Greedy
from kernel.stats import t_975
from workers import prompt_intervals
from workers.engines.base import SpecCounters


def acceptance(counters: SpecCounters, prompts: Sequence[SpecCounters] | None = None) -> Acceptance:
    """Return AL = 1 + accepted/drafts, rate = accepted/draft tokens, per-position rates (cumulative), the raw
    counts, and, from each prompt's own counters, AL's 95 % interval over prompts where there are enough."""
    drafts = counters.drafts
    figures: Acceptance = {
        "mean_acceptance_length": 1 + counters.accepted / drafts if drafts else None,
        "acceptance_rate": counters.accepted / counters.draft_tokens if counters.draft_tokens else None,
        "per_position": [n / drafts for n in counters.per_position] if drafts else [],
        "counts": {
            "drafts": drafts,
            "draft_tokens": counters.draft_tokens,
            "accepted": counters.accepted,
            "accepted_per_position": list(counters.per_position),
        },
    }
    if drafts and counters.per_position:
        figures["by_k"] = acceptance_by_k(counters)
    if prompts is not None:
        figures["prompts"] = len(prompts)
        steps = [p.drafts for p in prompts]
        if sum(steps):
            figures["prompts_effective"] = round(prompt_intervals.effective_prompts(steps), 1)
        interval = prompt_intervals.acceptance_interval(steps, [p.accepted for p in prompts])
        if interval is not None:
            figures["mean_acceptance_length_interval"] = list(interval)
    return figures


SHORTEST_BUCKET = 64  # tokens: the first bucket's edge; each next one doubles it


def length_buckets(max_model_len: int, max_tokens: int) -> list[int]:
    """Prompt-length bucket edges that fit the model's context: 64, 128, 256... doubling while below the longest
    prompt that leaves room for `max_tokens`, then that prompt's length (for 512 and 32: 64, 128, 256, 480)."""
    longest = max_model_len - max_tokens
    edges = [SHORTEST_BUCKET << n for n in range(32) if SHORTEST_BUCKET << n < longest]
    return [*edges, longest] if longest > 0 else []


def by_length(lengths: Sequence[int], prompts: Sequence[SpecCounters], edges: Sequence[int]) -> list[AtLength]:
    """Acceptance per prompt-length bucket: AL, its interval over the bucket's prompts, and the cumulative
    per-position rates. Acceptance falls as context grows (one EAGLE-3 head went from AL 2.30 at 2k tokens to 1.09
    at 16k): a suite's average hides that. An empty bucket is listed, with no figures."""
    rows: list[AtLength] = []
    for after, up_to in zip([0, *edges], edges, strict=False):
        inside = [counters for length, counters in zip(lengths, prompts, strict=True) if after < length <= up_to]
        figures = acceptance(sum(inside, SpecCounters()), inside)
        row: AtLength = {
            "after": after,
            "up_to": up_to,
            "prompts": len(inside),
            "mean_acceptance_length": figures["mean_acceptance_length"],
            "per_position": figures["per_position"],
        }
        if "mean_acceptance_length_interval" in figures:
            row["mean_acceptance_length_interval"] = figures["mean_acceptance_length_interval"]
        if "prompts_effective" in figures:
            row["prompts_effective"] = figures["prompts_effective"]
        rows.append(row)
    return rows


def by_temperature(runs: Mapping[float, tuple[SpecCounters, Sequence[SpecCounters] | None]]) -> list[AtTemperature]:
    """Acceptance at each temperature, on the same prompts: AL and each cumulative per-position rate, each with its
    interval over prompts. Until issue 56 the positions had Wilson's over drafting steps, which held the prompts'
    population rate in 0.26-0.77 of runs: steps within a prompt are not independent."""
    rows: list[AtTemperature] = []
    for temperature, (counters, prompts) in sorted(runs.items()):
        figures = acceptance(counters, prompts)
        row: AtTemperature = {
            "temperature": temperature,
            "mean_acceptance_length": figures["mean_acceptance_length"],
            "per_position": figures["per_position"],
            "per_position_interval": prompt_intervals.position_intervals(counters, prompts),
            "per_position_interval_over": "prompts",
            "drafts": counters.drafts,
        }
        for key in ("mean_acceptance_length_interval", "prompts", "prompts_effective"):
            if key in figures:
                row[key] = figures[key]
        rows.append(row)
    return rows


def acceptance_by_k(counters: SpecCounters) -> list[AtK]:
    """AL had the pair drafted only k tokens a step, for each k up to the K that ran: 1 + Σ_{i ≤ k} rate_i.

    A chain draft reaches position i only through positions 1..i-1, so a step that accepted j of K tokens
    would have accepted min(j, k) of k; vLLM's per-position counts over drafting steps give the share of steps
    reaching each position. Steps restart where the last one ended, so a run at k splits the text into other
    steps: the figure is the K run's, read at k, an estimate of a run at k, not its measurement; where prompts
    differ it is biased low (an independent review simulated 1.6-8 %). tests/workers/engines/test_vllm.py
    compares it with real runs at k.
    """
    reached = [n / counters.drafts for n in counters.per_position]
    return [{"k": k, "mean_acceptance_length": 1 + sum(reached[:k])} for k in range(1, len(reached) + 1)]


def first_divergence(expected: Sequence[int], found: Sequence[int]) -> int | None:
    """Return the first token index where the two outputs differ (a length difference counts), else None."""
    for index, (a, b) in enumerate(zip(expected, found, strict=False)):
        if a != b:
            return index
    return None if len(expected) == len(found) else min(len(expected), len(found))


def greedy_equivalence(expected: Sequence[Sequence[int]], found: Sequence[Sequence[int]]) -> Greedy:
    """Return the exact-match rate and, for every mismatched prompt, where it first diverges."""
    divergences: list[Divergence] = [
        {"prompt": index, "token": where}
        for index, (a, b) in enumerate(zip(expected, found, strict=True))
        if (where := first_divergence(a, b)) is not None
    ]
    total = len(expected)
    return {"exact_match": (total - len(divergences)) / total if total else None, "prompts": total, "divergences": divergences}


def chi_square_test(
    samples: Sequence[int],
    probabilities: dict[int, float],
    min_expected: float = 5.0,
    max_bins: int | None = None,
    alpha: float = 0.001,
) -> ChiSquare:
    """Pearson's test of sampled tokens against an exact distribution, its p-value exact by Monte Carlo.

    Tokens whose expected count is under `min_expected` are pooled into one bin, and the pool
    takes the smallest own bins until it too expects that much: a pool expecting 0.05 that
    joined on one sample rejected a right sampler 4.9 % of the time at a nominal 0.001. With
    `max_bins`, all but the likeliest max_bins - 1 are pooled (fewer degrees of freedom, more power).
    The χ² tail is anti-conservative this far out (2.2 times the nominal rate at 0.00025 with
    bins expecting 5-7, simulated), so the p-value comes from the exact multinomial null instead.
    """
    n = len(samples)
    counts = Counter(samples)
    kept = own_bins(probabilities, n, max_bins or len(probabilities) + 1, min_expected)
    observed = [counts[t] for t in kept]
    probs = [probabilities[t] for t in kept]
    rest = max(0.0, 1 - sum(probs))
    if rest * n > 1e-9 or n > sum(observed):
        observed.append(n - sum(observed))
        probs.append(rest)
    statistic = pearson(observed, probs, n)
    dof = max(len(probs) - 1, 0)  # one bin is no test: it read 1 and gave a power it did not have (issue 39)
    return {"samples": n, "bins": len(probs), "statistic": statistic, "dof": dof,
            "p_value": monte_carlo_p(statistic, tuple(probs), n, alpha)}  # fmt: skip


def pearson(observed: Sequence[int], probs: Sequence[float], n: int) -> float:
    """Pearson's statistic; a count where nothing is expected makes it infinite (the null never does that)."""
    if any(o and not p for o, p in zip(observed, probs, strict=True)):
        return math.inf
    return sum((o - p * n) ** 2 / (p * n) for o, p in zip(observed, probs, strict=True) if p > 0)


def monte_carlo_p(statistic: float, probs: tuple[float, ...], n: int, alpha: float) -> float:
    """The share of draws from the exact null at least as extreme, (1 + k) / (1 + draws), with k raised to its
    one-sided 99.9 % Poisson bound: the null sample is seeded and fixed, so the level it gives is conditional
    on it, and a plain count set 0.00025 at 0.00037 for one seed (39 draws beyond where 60 were due)."""
    null = _null_statistics(probs, n, draws=max(10_000, math.ceil(NULL_DRAWS_PER_ALPHA / alpha)))
    if not null.size:
        return 1.0
    # Ties count as "at least" (the statistic is discrete): a relative 1e-9 absorbs the rounding between the two sums.
    at_least = 0 if math.isinf(statistic) else null.size - int(np.searchsorted(null, statistic * (1 - 1e-9), side="left"))
    return min(1.0, (1 + at_least + 3.1 * math.sqrt(at_least + 1)) / (1 + null.size))


NULL_DRAWS_PER_ALPHA = 200  # about 200 null draws beyond the critical value, so the bound above costs ~20 % of the level


@functools.lru_cache(maxsize=64)
def _null_statistics(probs: tuple[float, ...], n: int, draws: int) -> npt.NDArray[np.float64]:
    """Pearson's statistic over `draws` multinomial samples from the null, sorted; seeded, so a record reproduces."""
    p = np.asarray(probs, dtype=np.float64)
    live = p > 0
    if n == 0 or live.sum() < 2:
        return np.empty(0)
    p = p[live] / p[live].sum()
    rng, expected, out = np.random.default_rng(20261203), p * n, []
    for start in range(0, draws, 50_000):
        counts = rng.multinomial(n, p, size=min(50_000, draws - start))
        out.append((((counts - expected) ** 2) / expected).sum(axis=1))
    return np.sort(np.concatenate(out))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Return the q-th percentile (0-100) by linear interpolation, None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Stein:
    """Stein's two-stage rule: time `first` pairs, and from their spread alone fix how many in all.

    The interval is mean(all logs) ± t(first - 1) · s_first / sqrt(total). Since the total depends
    only on the first stage's spread, which is independent of the mean, the interval is exact for
    normal log ratios, cap included: the cap costs precision, never coverage. Stopping when the
    running t interval looks narrow enough does not keep coverage (issue 24 simulated 0.90 at
    CV 8 %), and neither would stopping on whether the interval excludes 1.
    """

    first: int  # pairs timed before the rule looks
    most: int  # pairs at most
    target: float  # the half-width wanted, relative: 0.05 is ±5 %

    def total(self, first_ratios: Sequence[float]) -> int:
        """How many pairs in all, from the first stage's ratios: an even number, at most `most`."""
        spread = statistics.stdev(math.log(r) for r in first_ratios[: self.first])
        needed = max(self.first, math.ceil((t_975(self.first - 1) * spread / math.log1p(self.target)) ** 2))
        return min(needed + needed % 2, self.most)

    def interval(self, ratios: Sequence[float]) -> tuple[float, float, float, float]:
        """Return the centre of all `ratios` (their geometric mean, less the highest and the lowest from 5 pairs on),
        its 95 % interval, and its relative half-width."""
        logs = [math.log(r) for r in ratios]
        centre = trimmed_mean(logs)
        # Stein's spread is the first stage's; a block stalled after it would hide behind a clean first
        # stage, so the spread of all pairs stands in where it is larger (a wider interval keeps coverage).
        spread = max(statistics.stdev(logs[: self.first]), statistics.stdev(logs))
        half = t_975(self.first - 1) * spread / math.sqrt(len(logs))
        return math.exp(centre), math.exp(centre - half), math.exp(centre + half), math.expm1(half)


# From this many pairs on, a level's centre leaves out its highest and lowest log ratio: one block that another
# process stalled (issue 51: c=4 ratios 2.19, 1.47, 1.54, 1.50, 1.58 and 3.28 read 1.84 where four agree on 1.5)
# no longer carries it. The half-width stays the mean's, from the spread of all pairs, outliers included: simulated
# (tests/workers/test_stopping_rule.py), coverage stays 0.95-0.99 with drift and stalls, and 0.953-0.956 under
# AR(1) load at CV 8 %, within 0.0015 of the plain mean's.
TRIM_FROM = 5


def trimmed_mean(values: Sequence[float]) -> float:
    """The mean of `values` less their highest and lowest, from TRIM_FROM values on; else their mean."""
    ordered = sorted(values)
    return statistics.fmean(ordered[1:-1] if len(ordered) >= TRIM_FROM else ordered)


@dataclass(frozen=True)
class PromptStein(Stein):
    """Stein's rule on units that each carry one of `prompts` prompts, visited in rounds: unit i is prompt i % prompts.

    A prompt's own speedup (its acceptance) is a fixed effect of the level's prompt set, not noise: the spread is
    the units' scatter about their own prompt's mean, with prompts · (rounds - 1) degrees of freedom. Under
    log ratio = mean + prompt effect + normal noise, that spread is independent of every prompt's mean, so Stein's
    interval stays exact for the mean over the set (tests/workers/test_stopping_rule.py simulates it). `first`,
    `most` and the totals count units, whole rounds.
    """

    prompts: int = 1

    def __post_init__(self) -> None:
        if self.first < 2 * self.prompts or self.first % self.prompts or self.most % self.prompts:
            raise ValueError(f"{self.first} first and {self.most} most units: whole rounds of {self.prompts}, two first")

    @property
    def dof(self) -> int:
        return self.first - self.prompts

    def total(self, first_ratios: Sequence[float]) -> int:
        spread = self.spread(first_ratios[: self.first])
        needed = max(self.first, math.ceil((t_975(self.dof) * spread / math.log1p(self.target)) ** 2))
        return min(self.prompts * math.ceil(needed / self.prompts), self.most)

    def interval(self, ratios: Sequence[float]) -> tuple[float, float, float, float]:
        """The geometric mean over whole rounds (each prompt weighed alike), its 95 % interval and half-width."""
        whole = list(ratios[: len(ratios) - len(ratios) % self.prompts])
        centre = statistics.fmean(math.log(r) for r in whole)
        spread = max(self.spread(whole[: self.first]), self.spread(whole))
        half = t_975(self.dof) * spread / math.sqrt(len(whole))
        return math.exp(centre), math.exp(centre - half), math.exp(centre + half), math.expm1(half)

    def spread(self, ratios: Sequence[float]) -> float:
        """The log ratios' standard deviation about their own prompt's mean."""
        by_prompt = [[math.log(r) for r in ratios[p :: self.prompts]] for p in range(self.prompts)]
        squares = sum((x - statistics.fmean(logs)) ** 2 for logs in by_prompt for x in logs)
        return math.sqrt(squares / (len(ratios) - self.prompts))


def paired_ratio(ratios: Sequence[float]) -> tuple[float, float, float]:
    """Return the geometric mean of paired ratios and its 95 % interval (Student t on the logs).

    Each ratio compares two blocks run next to each other, so load that drifts over the
    run cancels within a pair; what is left varies from pair to pair, and the interval
    is that variation's; it needs two ratios at least.
    """
    if len(ratios) < 2:
        raise ValueError(f"an interval needs two paired ratios at least, not {len(ratios)}")
    logs = [math.log(r) for r in ratios]
    centre = statistics.fmean(logs)
    half = t_975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 and statistics.fmean(values) else None


def own_bins(probabilities: dict[int, float], samples: int, max_bins: int, min_expected: float = 5.0) -> list[int]:
    """Return the tokens that get a bin of their own: expected count ≥ min_expected, the likeliest first.

    The rest share one pooled bin, which takes the smallest own bins until it expects min_expected
    too (or holds nothing at all): a pool the null almost never reaches would reject on one sample.
    """
    kept = sorted((t for t, p in probabilities.items() if p * samples >= min_expected), key=lambda t: -probabilities[t])
    kept = kept[: max_bins - 1]
    while kept and 1e-12 < (1 - sum(probabilities[t] for t in kept)) * samples < min_expected:
        kept.pop()
    return sorted(kept)


def total_variation(samples: Sequence[int], probabilities: dict[int, float], tokens: Sequence[int]) -> float:
    """Return the total variation between the samples' frequencies and `probabilities`, over `tokens` plus the rest."""
    n = len(samples)
    if not n:
        return 0.0
    counts = Counter(samples)
    binned = [(counts[t] / n, probabilities.get(t, 0.0)) for t in tokens]
    rest = (1 - sum(q for q, _ in binned), 1 - sum(p for _, p in binned))
    return sum(abs(q - p) for q, p in [*binned, rest]) / 2
