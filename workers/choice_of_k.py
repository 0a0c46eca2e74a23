"""Which k: the speedup at every k up to the K that ran, predicted from step costs measured on the pair, and the
best k at each concurrency level.

A speculative step at k costs the draft's k proposals and one verifier pass over k + 1 tokens a sequence, and yields
AL(k) tokens a sequence (metrics.acceptance_by_k: estimated from the K run's per-position counts, biased low where
prompts differ).
The verifier alone yields one token a step. So at concurrency c

    speedup(k) = AL(k) * t_base / (k * t_draft + t_base + slope * c * k)

- t_base, the verifier's step with one token a sequence: c over the baseline server's measured tok/s at that level;
- slope, what one more token adds to a verifier pass: the slope of the time to first token over prompt length on
  the baseline server (a prefill of n tokens is the same pass as verifying n);
- t_draft, the draft's time per proposed token: what the K run's measured step costs beyond the verifier's pass over
  K + 1 tokens, over K. The K run's step is AL(K) * t_base / speedup(K), from the level's measured speedup.

At k = K the model gives back the measured speedup; below K it is a prediction and is labelled so. The best k at
each level is then measured as any speed figure (workers/speed.py), and only measured k's get a recipe.

One measured k charges the draft's whole step beyond the verifier's pass to its k tokens, which flatters a small k
when part of that cost is fixed per step (an independent review: k=1 predicted 1.48x where the simulated truth was
1.17-1.31x). Where a second k was measured at a level, `refit` splits the draft's cost into a fixed part per step and
a part per token from the two, and predicts again from that fit; the level says which fit its figures come from.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Mapping, Sequence

import httpx

from kernel import result
from kernel.errors import InfraError
from workers.serving import Server

# Prompt lengths the prefill slope is fitted over, in tokens, as many times each, interleaved: the shortest is a
# decode-sized pass, the longest what c = 4 at k = 7 verifies and more. Twelve one-token requests take about a second.
PREFILL_TOKENS = (8, 32, 64, 128)
PREFILL_ROUNDS = 3


def prefill(server: Server, model: str, vocabulary: Sequence[int], max_model_len: int, seed: int) -> dict[str, list[float]]:
    """Time one-token completions of fresh prompts of each length on `server`; return the median per length.

    Each prompt is a new draw from the suite's own tokens, so no cached prefix shortens it (vLLM caches whole blocks
    of 16 tokens from the start: a different first token is a miss)."""
    draw = random.Random(seed)  # noqa: S311  # a reproducible sample, not a secret
    lengths = [n for n in PREFILL_TOKENS if n < max_model_len - 1]
    seconds: dict[int, list[float]] = {n: [] for n in lengths}
    for _ in range(PREFILL_ROUNDS):
        for n in lengths:
            seconds[n].append(_first_token_seconds(server, model, [draw.choice(vocabulary) for _ in range(n)]))
    return {"tokens": [float(n) for n in lengths], "seconds": [statistics.median(seconds[n]) for n in lengths]}


def _first_token_seconds(server: Server, model: str, prompt: list[int]) -> float:
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0}
    began = time.perf_counter()
    answer = httpx.post(f"{server.url}/v1/completions", json=body, timeout=120)
    seconds = time.perf_counter() - began
    if answer.status_code != 200:
        raise InfraError("serve:request-failed", f"{server.name}: HTTP {answer.status_code}: {answer.text[:500]}")
    return seconds


def slope(measured: Mapping[str, Sequence[float]]) -> float:
    """Seconds per token: the least-squares slope of the medians, never below 0 (a flat pass costs nothing more)."""
    tokens, seconds = measured["tokens"], measured["seconds"]
    if len(tokens) < 2:
        return 0.0
    fitted, _ = statistics.linear_regression(tokens, seconds)
    return max(0.0, fitted)


def choose(levels: Mapping[str, result.Level], by_k: Sequence[result.AtK], per_token: float) -> dict[str, result.BestK]:
    """Every level's predicted speedup at each k up to K, and its best k. A level the measuring machine limited is
    left out: its speedup says nothing about the pair."""
    return {
        level: best_at(figures, int(level), by_k, per_token)
        for level, figures in levels.items()
        if not (figures.get("stopping") and figures["stopping"]["reason"] == result.MACHINE_LIMITED)
    }


def best_at(figures: result.Level, concurrency: int, by_k: Sequence[result.AtK], per_token: float) -> result.BestK:
    """One level's step costs, each k's predicted speedup (the module's formula) and the best k (the smallest of a
    tie: fewer drafted tokens waste less when acceptance drops)."""
    top = len(by_k)
    lengths = [row["mean_acceptance_length"] for row in by_k]
    base = concurrency / figures["baseline"]["tokens_per_second"]
    step_at_top = lengths[-1] * base / figures["speedup"]

    def verify(tokens: int) -> float:
        return base + per_token * concurrency * (tokens - 1)

    draft = max(0.0, (step_at_top - verify(top + 1)) / top)
    predicted: list[result.KSpeed] = [
        {"k": k, "mean_acceptance_length": al, "predicted_speedup": al * base / (k * draft + verify(k + 1))}
        for k, al in enumerate(lengths, start=1)
    ]
    best = max(predicted, key=lambda row: (round(row["predicted_speedup"], 6), -row["k"]))
    return {
        "baseline_step_seconds": base,
        "draft_seconds_per_token": draft,
        "predicted": predicted,
        "best_k": best["k"],
    }


def refit(best: result.BestK, top: result.Level, concurrency: int, by_k: Sequence[result.AtK], per_token: float) -> result.BestK:
    """`best` predicted again from a draft cost fitted to two measured k's: the run's (`top`, at K) and the best one's
    (`best["measured"]`); unchanged where the second was not measured or is the run's."""
    timed, k_top = best.get("measured"), len(by_k)
    if timed is None or best["best_k"] == k_top:
        return best
    lengths = [row["mean_acceptance_length"] for row in by_k]
    base = best["baseline_step_seconds"]

    def beyond_verify(k: int, speedup: float) -> float:  # the draft's share of a step at k
        return lengths[k - 1] * base / speedup - (base + per_token * concurrency * k)

    k_low = best["best_k"]
    high, low = beyond_verify(k_top, top["speedup"]), beyond_verify(k_low, timed["speedup"])
    per_draft_token = max(0.0, (high - low) / (k_top - k_low))
    fixed = max(0.0, high - k_top * per_draft_token)
    predicted: list[result.KSpeed] = [
        {"k": k, "mean_acceptance_length": al,
         "predicted_speedup": al * base / (fixed + k * per_draft_token + base + per_token * concurrency * k)}
        for k, al in enumerate(lengths, start=1)
    ]  # fmt: skip
    return {**best, "predicted": predicted, "draft_seconds_per_token": per_draft_token, "draft_seconds_per_step": fixed,
            "fitted_from_k": [k_low, k_top]}  # fmt: skip


def to_measure(choice: Mapping[str, result.BestK], run_k: int) -> dict[int, list[str]]:
    """The levels each best k other than the run's must be measured at, keyed by that k."""
    wanted: dict[int, list[str]] = {}
    for level in sorted(choice, key=int):
        if (k := choice[level]["best_k"]) != run_k:
            wanted.setdefault(k, []).append(level)
    return wanted
