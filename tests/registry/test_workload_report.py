"""The workload report's judgement: speed at a stated concurrency, and the recommendation with its uncertainty."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kernel import result
from registry.workload_report import at_concurrency, recommend


def level(concurrency: int, speedup: float, low: float, high: float) -> Any:
    return {"concurrency": concurrency, "speedup": speedup, "interval": [low, high], "supports": result.speed_label([low, high])}


def candidate(name: str, speed: list[Any], concurrency: int, *, equivalent: bool = True) -> Any:
    pair = SimpleNamespace(draft=SimpleNamespace(repo_id=name), method="draft_model")
    acceptance = {"mean_acceptance_length": 3.0}
    return {
        "pair": pair,
        "speed": speed,
        "at": at_concurrency(speed, concurrency),
        "equivalent": equivalent,
        "acceptance": acceptance,
    }


SPEED = [level(1, 2.0, 1.8, 2.2), level(4, 1.0, 0.9, 1.1), level(16, 0.5, 0.45, 0.55)]


def at(concurrency: int) -> Any:
    found = at_concurrency(SPEED, concurrency)
    assert found is not None
    return found


def test_a_measured_level_is_read_as_measured_and_a_level_between_is_interpolated_in_log_log():
    assert at(4)["speedup"] == 1.0 and not at(4)["interpolated"]
    between = at(2)
    assert between["interpolated"] and between["speedup"] == pytest.approx(2**0.5)  # halfway in log2 c, geometric in speedup
    assert between["interval"][0] == pytest.approx((1.8 * 0.9) ** 0.5)


def test_nothing_is_extrapolated_beyond_the_measured_levels():
    beyond = at(64)
    assert (beyond["concurrency"], beyond["speedup"], beyond["interpolated"]) == (16, 0.5, False)


def test_the_recommendation_is_the_fastest_equivalent_draft_and_names_a_tie():
    fast = candidate("org/fast", SPEED, 1)
    close = candidate("org/close", [level(1, 1.9, 1.6, 2.1)], 1)
    wrong = candidate("org/wrong", [level(1, 3.0, 2.8, 3.2)], 1, equivalent=False)
    chosen = recommend([close, wrong, fast], 1)
    assert chosen is not None and chosen["choice"] is fast
    assert (
        "org/fast: 2.00\N{MULTIPLICATION SIGN} [1.80, 2.20] at concurrency 1" in chosen["reason"]
        and "not measurably faster than org/close" in chosen["reason"]
    )


def test_no_draft_is_recommended_where_the_best_interval_includes_one():
    chosen = recommend([candidate("org/fast", SPEED, 4)], 4)
    assert chosen is not None and chosen["choice"] is None
    assert "No draft measurably speeds up this traffic" in chosen["reason"] and "Serve the verifier alone" in chosen["reason"]


def test_no_draft_is_recommended_when_every_candidate_changed_the_outputs():
    chosen = recommend([candidate("org/wrong", SPEED, 1, equivalent=False)], 1)
    assert chosen is not None and chosen["choice"] is None and "none is safe to deploy" in chosen["reason"]
    assert recommend([], 1) is None
