"""Which k: the step-cost model's predictions, the best k per level, and what is left to measure."""

from __future__ import annotations

import pytest

from kernel import result
from workers import choice_of_k

# AL read at k = 1..4 from one K = 4 run, as a distilled draft gives them.
BY_K: list[result.AtK] = [{"k": k, "mean_acceptance_length": al} for k, al in enumerate((1.9, 2.7, 3.4, 4.0), start=1)]


def level(speedup: float, baseline_tokens_per_second: float = 100.0, *, limited: bool = False) -> result.Level:
    figures: dict[str, object] = {
        "speedup": speedup,
        "speedup_interval": [speedup * 0.9, speedup * 1.1],
        "baseline": {"tokens_per_second": baseline_tokens_per_second},
        "speculative": {"tokens_per_second": baseline_tokens_per_second * speedup},
    }
    if limited:
        figures["stopping"] = {"reason": result.MACHINE_LIMITED}
    return figures  # type: ignore[return-value]


def predicted(best: result.BestK) -> dict[int, float]:
    return {row["k"]: row["predicted_speedup"] for row in best["predicted"]}


def test_at_the_run_k_the_model_gives_back_the_measured_speedup():
    for concurrency, speedup in ((1, 2.6), (4, 1.7)):
        best = choice_of_k.best_at(level(speedup), concurrency, BY_K, per_token=0.0001)
        assert predicted(best)[4] == pytest.approx(speedup)


def test_a_draft_that_costs_as_much_as_it_saves_is_best_drafting_one_token():
    # Base step 0.01 s; the K = 4 step measured at AL 4.0 / 1.0x = 0.04 s, so the draft costs 0.0075 s a token.
    best = choice_of_k.best_at(level(1.0), 1, BY_K, per_token=0.0)
    assert best["draft_seconds_per_token"] == pytest.approx(0.0075)
    assert predicted(best)[1] == pytest.approx(1.9 * 0.01 / (0.0075 + 0.01))
    assert best["best_k"] == 1 and predicted(best)[1] > predicted(best)[2] > predicted(best)[3] > predicted(best)[4]


def test_a_nearly_free_draft_is_best_at_the_largest_k_that_ran():
    best = choice_of_k.best_at(level(3.9), 1, BY_K, per_token=0.0)
    assert best["best_k"] == 4 and best["draft_seconds_per_token"] < 0.0001


def test_a_verifier_whose_step_grows_with_the_tokens_it_verifies_favours_a_smaller_k_at_higher_concurrency():
    # The same pair: a cheap draft, but each verified token adds 1 ms a sequence; at c = 8 that weighs on every k.
    low = choice_of_k.best_at(level(3.0), 1, BY_K, per_token=0.001)
    high = choice_of_k.best_at(level(3.0, baseline_tokens_per_second=400.0), 8, BY_K, per_token=0.001)
    assert high["best_k"] < low["best_k"]


def test_a_draft_slower_than_measured_is_never_given_a_negative_cost():
    # A measured speedup above what a free draft allows (noise) would mean a draft that gives time back.
    best = choice_of_k.best_at(level(4.5), 1, BY_K, per_token=0.0)
    assert best["draft_seconds_per_token"] == 0.0


def test_a_machine_limited_level_gets_no_best_k_and_only_other_ks_are_left_to_measure():
    chosen = choice_of_k.choose({"1": level(1.0), "2": level(1.0, 180.0), "4": level(1.0, limited=True)}, BY_K, 0.0)
    assert sorted(chosen) == ["1", "2"]
    assert choice_of_k.to_measure(chosen, run_k=4) == {1: ["1", "2"]}
    assert choice_of_k.to_measure(chosen, run_k=1) == {}


def test_the_slope_is_the_least_squares_fit_and_never_negative():
    assert choice_of_k.slope({"tokens": [8, 32, 64, 128], "seconds": [0.02 + 0.0001 * n for n in (8, 32, 64, 128)]}) == (
        pytest.approx(0.0001)
    )
    assert choice_of_k.slope({"tokens": [8, 32], "seconds": [0.03, 0.02]}) == 0.0
    assert choice_of_k.slope({"tokens": [8], "seconds": [0.03]}) == 0.0


def test_two_measured_ks_split_the_drafts_cost_into_a_fixed_and_a_per_token_part_and_predict_every_k():
    """A draft whose step costs a fixed 4 ms plus 1 ms a token (issue 39): one measured k charges it all per token and
    flatters k=1; the fit from two recovers the truth at every k."""
    base, per_token, concurrency = 1 / 100.0, 0.0001, 1

    def truth(k: int) -> float:
        al = BY_K[k - 1]["mean_acceptance_length"]
        return al * base / (0.004 + 0.001 * k + base + per_token * concurrency * k)

    best = choice_of_k.best_at(level(truth(4)), concurrency, BY_K, per_token)
    assert predicted(best)[1] > truth(1) * 1.1  # the one-k model's flattery
    forced: result.BestK = {**best, "best_k": 2, "measured": level(truth(2))}
    fitted = choice_of_k.refit(forced, level(truth(4)), concurrency, BY_K, per_token)
    assert predicted(fitted) == pytest.approx({k: truth(k) for k in range(1, 5)})
    assert fitted["draft_seconds_per_step"] == pytest.approx(0.004) and fitted["fitted_from_k"] == [2, 4]
    assert choice_of_k.refit(best, level(truth(4)), concurrency, BY_K, per_token) is best  # nothing more measured
