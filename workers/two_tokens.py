"""The joint two-token sampling test, shared by the engine's controls and a pair's own test.

vLLM samples the first token in the prefill, so the second is the first one speculation decides;
the test compares the joint frequencies of the first two tokens after a prefix with the exact
P(t1) P(t2 | t1) read from the verifier's logits, and every sample counts. The sample count
follows from the power asked for: Pearson's test over its bins detects every total variation
≥ tv between the binned frequencies with that power (a deviation that stays inside one bin is
invisible to it, so every page says "TV over the binned outcomes", and the test records what
its bins cover).

The bins: the likeliest outcomes one each, and the rest in bands by the verifier's P(t2 | t1).
Speculation leaves the first token's marginal alone, so a lossy sampler moves mass between a
first token's likely and unlikely continuations; the bands add that up over every first token,
where one pooled bin of everything unlikely saw only its net change (issue 39: 55-97 % of the
mass sat in that pool on broad prefixes, and a draft-like sampler at TV 0.15 went uncaught 60 %
of the time). tests/workers/test_two_token_binning.py simulates both binnings.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from kernel import result, stats
from workers import metrics
from workers.exact import exact_model

OWN_OUTCOMES = 15  # the likeliest outcomes, one bin each (the fewer bins, the fewer samples the power needs)
# Three bands of the rest, each expecting as much: simulated, two to four detect a draft-like sampler about as
# well, and splitting finer pays a degree of freedom per band for differences the bands average away.
BANDS = 3
MAX_BINS = OWN_OUTCOMES + BANDS
MIN_EXPECTED = 5.0  # per bin, under the verifier's distribution (metrics.own_bins)
FIRST_TOKENS = 32  # first tokens whose continuations are read exactly; rarer ones fall in the least likely band
KEY = 1 << 24  # a pair of tokens (t1, t2) is counted as t1 * KEY + t2; STOP stands for "no second token"
STOP = KEY - 1
# The noncentral χ² power is asymptotic; the review's Monte Carlo found the worst case 0.3 % short of
# it (0.987 against 0.99 stated), so every count takes this much more.
SAMPLE_MARGIN = 1.05


def distributions(verifier: Path, prefixes: list[list[int]], temperature: float, dtype: str) -> list[dict[int, float]]:
    """Return P(t1, t2) = P(t1) P(t2 | t1) per prefix, for its FIRST_TOKENS likeliest t1 (an end token has no t2)."""
    eos = json.loads((verifier / "config.json").read_text()).get("eos_token_id")
    ends = set(eos) if isinstance(eos, list) else {eos}
    with exact_model(verifier, temperature, dtype) as read:
        firsts = read(prefixes)
        chosen = [sorted(first, key=first.__getitem__, reverse=True)[:FIRST_TOKENS] for first in firsts]
        expand = [(i, t) for i, tokens in enumerate(chosen) for t in tokens if t not in ends]
        seconds = read([[*prefixes[i], t] for i, t in expand])
    joints: list[dict[int, float]] = [
        {t * KEY + STOP: firsts[i][t] for t in chosen[i] if t in ends} for i in range(len(prefixes))
    ]
    for (i, t), second in zip(expand, seconds, strict=True):
        joints[i].update({t * KEY + u: firsts[i][t] * p for u, p in second.items()})
    return joints


@dataclass(frozen=True)
class Binning:
    """The bins of one test: `own` outcomes one each, likeliest first; then bands of the others by the verifier's
    P(t2 | t1), likeliest first, each starting at its edge; the last band, the remainder, also takes every outcome
    the verifier's table lacks. The bins follow from the verifier's distribution and the sample count alone, never
    from the samples, so the Monte Carlo null of the bins is the test's exact null."""

    exact: Mapping[int, float] = field(repr=False)
    own: tuple[int, ...]
    edges: tuple[float, ...]
    remainder: bool  # False when the own outcomes hold all the probability
    firsts: Mapping[int, float] = field(repr=False)  # P(t1), to read P(t2 | t1) off the joint

    @property
    def bins(self) -> int:
        return len(self.own) + len(self.edges) + self.remainder

    @property
    def dof(self) -> int:
        return max(self.bins - 1, 0)

    @property
    def own_mass(self) -> float:
        return sum(self.exact[t] for t in self.own)

    @cached_property
    def _own_bin(self) -> dict[int, int]:
        return {outcome: b for b, outcome in enumerate(self.own)}

    def bin_of(self, outcome: int) -> int:
        """The outcome's bin; `bins` (one past the last) for an outcome with no bin and no remainder to fall in."""
        if outcome in self._own_bin:
            return self._own_bin[outcome]
        first = self.firsts.get(outcome // KEY, 0.0)
        share = self.exact.get(outcome, 0.0) / first if first > 0 else 0.0
        return len(self.own) + sum(share < edge for edge in self.edges)

    def probabilities(self, distribution: Mapping[int, float]) -> list[float]:
        """Each bin's probability under `distribution` (the verifier's, or a sampler's in a simulation)."""
        found = [0.0] * (self.bins + 1)
        for outcome, p in distribution.items():
            found[self.bin_of(outcome)] += p
        if self.remainder:
            found[self.bins - 1] += max(0.0, 1 - sum(distribution.values()))
        return found[: self.bins]


def binning(exact: dict[int, float], samples: int, own_outcomes: int = OWN_OUTCOMES, bands: int = BANDS) -> Binning:
    """The bins for `samples` draws: each expects MIN_EXPECTED at least (bands=1: one pooled bin, the rule before
    issue 39)."""
    own = sorted(metrics.own_bins(exact, samples, own_outcomes + 1, MIN_EXPECTED), key=lambda t: -exact[t])
    firsts: dict[int, float] = {}
    for outcome, p in exact.items():
        firsts[outcome // KEY] = firsts.get(outcome // KEY, 0.0) + p
    rest = 1 - sum(exact[t] for t in own)
    flat = Binning(exact, tuple(own), (), rest * samples > 1e-9, firsts)
    for count in range(min(bands, int(rest * samples / MIN_EXPECTED)), 1, -1):
        split = Binning(exact, tuple(own), _edges(flat, rest, count), True, firsts)
        if all(p * samples >= MIN_EXPECTED for p in split.probabilities(exact)[len(own) :]):
            return split
    return flat


def _edges(flat: Binning, rest: float, count: int) -> tuple[float, ...]:
    """Where `count` bands of about equal mass start, by P(t2 | t1) over the outcomes `flat` pools."""
    shares = sorted(((p / flat.firsts[t // KEY], p) for t, p in flat.exact.items() if t not in flat.own and p > 0), reverse=True)
    edges: list[float] = []
    mass = 0.0
    for share, p in shares:
        mass += p
        if mass >= rest * (len(edges) + 1) / count:
            edges.append(share)
            if len(edges) == count - 1:
                break
    return tuple(edges)


def power_plan(tv: float, alpha: float, power: float, exact: dict[int, float] | None = None) -> result.Power:
    """The samples a test needs: for the bins `exact` settles into, or (unknown yet) for the most bins."""
    needed = stats.samples_for_tv(tv, MAX_BINS - 1, alpha, power)
    for _ in range(3 if exact else 0):  # the bins depend on the sample count; settle both
        dof = binning(exact or {}, needed).dof
        needed = stats.samples_for_tv(tv, max(dof, 1), alpha, power)
    return {"tv": tv, "power": power, "alpha": alpha, "samples_needed": math.ceil(needed * SAMPLE_MARGIN)}


def pairs(completions: Sequence[Sequence[int]]) -> list[int]:
    """Each completion's first two tokens as one outcome (STOP when it ended after one)."""
    return [c[0] * KEY + (c[1] if len(c) > 1 else STOP) for c in completions if c]


def test(outcomes: list[int], exact: dict[int, float], power: result.Power) -> result.TwoTokenTest:
    """Pearson's test of the outcomes against the exact joint, with what the samples drawn detect over its bins."""
    n, bins = len(outcomes), binning(exact, len(outcomes))
    counts = Counter(bins.bin_of(t) for t in outcomes)
    observed, probs = [counts[b] for b in range(bins.bins)], bins.probabilities(exact)
    if counts[bins.bins]:  # an outcome the verifier gives no probability and no bin holds: the null never does that
        observed, probs = [*observed, counts[bins.bins]], [*probs, 0.0]
    statistic = metrics.pearson(observed, probs, n) if n else 0.0
    return {"samples": n, "bins": len(probs), "statistic": statistic, "dof": bins.dof,
            "p_value": metrics.monte_carlo_p(statistic, tuple(probs), n, power["alpha"]),
            "observed_tv": sum(abs(o / n - p) for o, p in zip(observed, probs, strict=True)) / 2 if n else 0.0,
            "power": power, "detectable_tv": reach(bins, n, power), "own_outcomes": len(bins.own),
            "own_mass": bins.own_mass, "bands": bins.bins - len(bins.own)}  # fmt: skip


def reach(bins: Binning, samples: int, power: result.Power) -> float:
    """The least total variation over these bins that `samples` detect with the stated power; 1 (nothing) with no
    degree of freedom: one bin holds every sample whatever the sampler does."""
    if bins.dof < 1:
        return 1.0
    return stats.detectable_tv(samples, bins.dof, power["alpha"], power["power"]) * math.sqrt(SAMPLE_MARGIN)


def powered(found: result.TwoTokenTest) -> bool:
    """Whether the samples drawn reached the stated power (within stats.POWER_SLACK, as the verdict reads it)."""
    return found["dof"] >= 1 and found["detectable_tv"] <= found["power"]["tv"] * stats.POWER_SLACK
