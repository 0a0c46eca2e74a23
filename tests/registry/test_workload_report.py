"""The workload report's judgement: speed at a stated concurrency, and the recommendation with its uncertainty."""

from __future__ import annotations

import math
import random
import statistics
from types import SimpleNamespace
from typing import Any

from kernel import result, stats
from registry.traffic.report import at_concurrency, recommend


def level(concurrency: int, speedup: float, low: float, high: float, dof: int = 3) -> Any:
    return {"concurrency": concurrency, "speedup": speedup, "interval": [low, high], "supports": result.speed_label([low, high]),
            "dof": dof}  # fmt: skip


def candidate(name: str, speed: list[Any], concurrency: int, *, equivalent: bool = True, sampling: str = "pass") -> Any:
    pair = SimpleNamespace(draft=SimpleNamespace(repo_id=name), method="draft_model")
    acceptance = {"mean_acceptance_length": 3.0}
    properties = [{"title": "greedy equivalence", "outcome": "pass"}, {"title": "sampling equivalence", "outcome": sampling}]
    return {
        "pair": pair,
        "speed": speed,
        "at": at_concurrency(speed, concurrency),
        "margin": result.MARGIN,
        "equivalent": equivalent,
        "acceptance": acceptance,
        "properties": properties,
    }


SPEED = [level(1, 2.0, 1.8, 2.2), level(4, 1.0, 0.9, 1.1), level(16, 0.5, 0.45, 0.55)]


def test_a_measured_level_is_read_as_measured_and_nothing_is_interpolated_or_extrapolated():
    found = at_concurrency(SPEED, 4)
    assert found is not None and (found["speedup"], found["interval"]) == (1.0, [0.9, 1.1])
    assert at_concurrency(SPEED, 2) is None  # a blend of two intervals' ends is not a confidence interval
    assert at_concurrency(SPEED, 64) is None  # and c=16 does not stand in for c=64


def test_the_recommendation_is_the_fastest_equivalent_draft_its_interval_widened_for_the_drafts_compared():
    fast = candidate("org/fast", SPEED, 1)
    close = candidate("org/close", [level(1, 1.9, 1.6, 2.1)], 1)
    wrong = candidate("org/wrong", [level(1, 3.0, 2.8, 3.2)], 1, equivalent=False)
    chosen = recommend([close, wrong, fast], 1)
    assert chosen is not None and chosen["choice"] is fast
    low, high = stats.widened([1.8, 2.2], 3, 2)  # two eligible drafts: each interval at 1 - 0.05/2
    assert low < 1.8 and high > 2.2
    assert (
        f"org/fast: 2.00\N{MULTIPLICATION SIGN} [{low:.2f}, {high:.2f}] at concurrency 1 (the interval for 2 drafts at once)"
        in (chosen["reason"])
    )
    assert "not measurably faster than org/close" in chosen["reason"]


def test_greedy_and_sampling_are_stated_apart_in_the_recommendation():
    chosen = recommend([candidate("org/fast", SPEED, 1, sampling="not-judgeable")], 1)
    assert chosen is not None and "greedy outputs equal to the verifier's, sampling not-judgeable" in chosen["reason"]
    assert "outputs equal to the verifier's." not in chosen["reason"]


def test_a_level_no_draft_measured_is_said_so():
    chosen = recommend([candidate("org/fast", SPEED, 2)], 2)
    assert chosen is not None and chosen["choice"] is None and "No draft was measured at concurrency 2" in chosen["reason"]


def test_with_k_drafts_and_no_real_gain_a_draft_is_recommended_at_most_2_5_percent_of_the_time_simulated():
    # Five drafts, each truly 1.0x, each level's interval Stein's after a first stage of 4 pairs (t with 3 dof).
    rng, trials, drafts = random.Random(5), 4000, 5
    chosen = plain = 0
    for _ in range(trials):
        rows = []
        for i in range(drafts):
            logs = [rng.gauss(0, 0.1) for _ in range(4)]
            mean, half = statistics.fmean(logs), stats.t_975(3) * statistics.stdev(logs) / 2
            rows.append(candidate(f"org/d{i}", [level(1, math.exp(mean), math.exp(mean - half), math.exp(mean + half))], 1))
        found = recommend(rows, 1)
        chosen += bool(found and found["choice"])
        best = max(rows, key=lambda c: c["at"]["speedup"])
        plain += best["at"]["interval"][0] > 1
    assert plain / trials > 0.05  # gated on its own interval, the best of five passed far more often than 2.5 %
    assert chosen / trials <= 0.025 + 3 * (0.025 * 0.975 / trials) ** 0.5


def test_no_draft_is_recommended_where_the_best_interval_includes_one():
    chosen = recommend([candidate("org/fast", SPEED, 4)], 4)
    assert chosen is not None and chosen["choice"] is None
    assert "No draft is measurably faster on this traffic" in chosen["reason"] and "Serve the verifier alone" in chosen["reason"]


def test_no_draft_is_recommended_where_the_best_interval_is_above_one_but_not_above_the_margin():
    chosen = recommend([candidate("org/slight", [level(1, 1.1, 1.01, 1.2, dof=30)], 1)], 1)
    assert chosen is not None and chosen["choice"] is None and "the practical margin, 1.03" in chosen["reason"]


def test_no_draft_is_recommended_when_every_candidate_changed_the_outputs():
    chosen = recommend([candidate("org/wrong", SPEED, 1, equivalent=False)], 1)
    assert chosen is not None and chosen["choice"] is None and "none is safe to deploy" in chosen["reason"]
    assert recommend([], 1) is None
