"""The joint two-token sampling test, shared by the engine's controls and a pair's own test.

vLLM samples the first token in the prefill, so the second is the first one speculation decides;
the test compares the joint frequencies of the first two tokens after a prefix with the exact
P(t1) P(t2 | t1) read from the verifier's logits, and every sample counts. The sample count
follows from the power asked for: Pearson's test over at most MAX_BINS bins detects every total
variation ≥ tv over its binned outcomes with that power (a deviation inside the pooled bin of
unlikely outcomes is invisible to it, so every page says "TV over the binned outcomes").
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from kernel import result, stats
from workers import metrics
from workers.exact import exact_model

MAX_BINS = 16
FIRST_TOKENS = 32  # first tokens whose continuations are read exactly; rarer ones fall in the pooled bin
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


def power_plan(tv: float, alpha: float, power: float, exact: dict[int, float] | None = None) -> result.Power:
    """The samples a test needs: for the bins `exact` settles into, or (unknown yet) for the most bins."""
    needed = stats.samples_for_tv(tv, MAX_BINS - 1, alpha, power)
    for _ in range(3 if exact else 0):  # the bins depend on the sample count; settle both
        dof = len(metrics.own_bins(exact or {}, needed, MAX_BINS))
        needed = stats.samples_for_tv(tv, max(dof, 1), alpha, power)
    return {"tv": tv, "power": power, "alpha": alpha, "samples_needed": math.ceil(needed * SAMPLE_MARGIN)}


def pairs(completions: Sequence[Sequence[int]]) -> list[int]:
    """Each completion's first two tokens as one outcome (STOP when it ended after one)."""
    return [c[0] * KEY + (c[1] if len(c) > 1 else STOP) for c in completions if c]


def test(outcomes: list[int], exact: dict[int, float], power: result.Power) -> result.TwoTokenTest:
    """Pearson's test of the outcomes against the exact joint, with what the samples drawn detect."""
    found = metrics.chi_square_test(outcomes, exact, max_bins=MAX_BINS, alpha=power["alpha"])
    bins = metrics.own_bins(exact, len(outcomes), MAX_BINS)
    detectable = stats.detectable_tv(len(outcomes), found["dof"], power["alpha"], power["power"])
    return {**found, "observed_tv": metrics.total_variation(outcomes, exact, bins), "power": power,
            "detectable_tv": detectable * SAMPLE_MARGIN**0.5}  # fmt: skip


def powered(found: result.TwoTokenTest) -> bool:
    """Whether the samples drawn reached the stated power (within stats.POWER_SLACK, as the verdict reads it)."""
    return found["detectable_tv"] <= found["power"]["tv"] * stats.POWER_SLACK
