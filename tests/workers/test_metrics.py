"""The figures a certification reports, from hand-made inputs."""

from __future__ import annotations

import random

import pytest

from kernel import stats
from workers import metrics, prompt_intervals
from workers.engines.base import SpecCounters


def test_acceptance_follows_vllms_definitions():
    found = metrics.acceptance(SpecCounters(drafts=10, draft_tokens=40, accepted=25, per_position=(9, 7, 5, 4)))
    assert found["mean_acceptance_length"] == 3.5
    assert found["acceptance_rate"] == 25 / 40
    assert found["per_position"] == [0.9, 0.7, 0.5, 0.4]
    assert found["counts"]["accepted_per_position"] == [9, 7, 5, 4]


def test_no_drafts_gives_no_acceptance_rather_than_a_division_error():
    assert metrics.acceptance(SpecCounters())["mean_acceptance_length"] is None


def test_counters_subtract_per_position():
    later = SpecCounters(5, 20, 12, (5, 4, 2, 1))
    assert later - SpecCounters(2, 8, 5, (2, 2, 1)) == SpecCounters(3, 12, 7, (3, 2, 1, 1))


@pytest.mark.parametrize(
    ("expected", "found", "where"),
    [([1, 2, 3], [1, 2, 3], None), ([1, 2, 3], [1, 9, 3], 1), ([1, 2, 3], [1, 2], 2), ([], [5], 0)],
)
def test_first_divergence(expected, found, where):
    assert metrics.first_divergence(expected, found) == where


def test_greedy_equivalence_lists_every_mismatched_prompt():
    found = metrics.greedy_equivalence([[1, 2], [3, 4], [5]], [[1, 2], [3, 9], [6]])
    assert found["exact_match"] == 1 / 3
    assert found["divergences"] == [{"prompt": 1, "token": 1}, {"prompt": 2, "token": 0}]


@pytest.mark.parametrize(("statistic", "dof", "p"), [(3.841458820694124, 1, 0.05), (18.307038053275146, 10, 0.05), (0.0, 4, 1.0)])
def test_the_chi_square_tail_matches_tabulated_values(statistic, dof, p):
    assert stats.chi_square_sf(statistic, dof) == pytest.approx(p, abs=1e-9)


def test_the_chi_square_tail_matches_torch_far_out():
    import torch

    for statistic, dof in [(100.0, 50), (0.5, 3), (40.0, 7)]:
        exact = 1 - float(
            torch.special.gammainc(torch.tensor(dof / 2, dtype=torch.float64), torch.tensor(statistic / 2, dtype=torch.float64))
        )
        assert stats.chi_square_sf(statistic, dof) == pytest.approx(exact, rel=1e-9)


def test_the_sampling_test_accepts_samples_from_the_distribution_and_rejects_a_biased_one():
    rng = random.Random(7)
    exact = {0: 0.5, 1: 0.3, 2: 0.15, 3: 0.05}
    fair = rng.choices(list(exact), weights=list(exact.values()), k=2000)
    biased = rng.choices(list(exact), weights=[0.6, 0.25, 0.1, 0.05], k=2000)
    assert metrics.chi_square_test(fair, exact)["p_value"] > 0.01
    assert metrics.chi_square_test(biased, exact)["p_value"] < 3e-5  # 2e-5 is the least 200,000 null draws can say


def test_rare_tokens_are_pooled_so_every_bin_expects_enough():
    exact = {i: 0.9 if i == 0 else 0.1 / 99 for i in range(100)}
    found = metrics.chi_square_test([0] * 95 + [5] * 5, exact)
    assert found["bins"] == 2 and found["samples"] == 100


def test_percentiles_interpolate():
    assert metrics.percentile([1, 2, 3, 4], 50) == 2.5
    assert metrics.percentile([], 50) is None


def test_length_buckets_double_from_64_and_end_at_the_longest_prompt_that_leaves_room_to_answer():
    assert metrics.length_buckets(512, 32) == [64, 128, 256, 480]
    assert metrics.length_buckets(512, 64) == [64, 128, 256, 448]  # the example for the toy zoo
    assert metrics.length_buckets(16384, 256)[-2:] == [8192, 16128]
    assert metrics.length_buckets(96, 32) == [64] and metrics.length_buckets(32, 32) == []


def test_acceptance_by_length_groups_each_prompts_own_counters_by_its_length():
    enough = prompt_intervals.MIN_PROMPTS_FOR_INTERVAL
    short = [SpecCounters(drafts=10, draft_tokens=40, accepted=30, per_position=(9, 8, 7, 6))] * enough  # AL 4.0
    long = [SpecCounters(drafts=10, draft_tokens=40, accepted=2, per_position=(2, 0, 0, 0))] * 3  # AL 1.2
    rows = metrics.by_length([20 + i for i in range(enough)] + [300, 310, 320], short + long, [64, 128, 256, 480])
    assert [(r["after"], r["up_to"], r["prompts"]) for r in rows] == [(0, 64, enough), (64, 128, 0), (128, 256, 0), (256, 480, 3)]
    assert rows[0]["mean_acceptance_length"] == pytest.approx(4.0) and rows[3]["mean_acceptance_length"] == pytest.approx(1.2)
    assert rows[0]["mean_acceptance_length_interval"] == pytest.approx([4.0, 4.0])  # the minimum: an interval, of no width
    assert "mean_acceptance_length_interval" not in rows[3]  # 3 prompts: too few for one
    assert rows[1]["mean_acceptance_length"] is None and rows[1]["per_position"] == []  # no prompt that long
    assert rows[3]["per_position"] == pytest.approx([0.2, 0.0, 0.0, 0.0])


def test_acceptance_by_temperature_lists_each_temperature_coolest_first_with_al_and_position_intervals():
    greedy = [SpecCounters(drafts=10, draft_tokens=40, accepted=20 + i % 3, per_position=(8, 6, 4, 2 + i % 3)) for i in range(12)]
    hot = [SpecCounters(drafts=12, draft_tokens=48, accepted=10, per_position=(6, 3, 1, 0))] * 12
    rows = metrics.by_temperature({1.0: (sum(hot, SpecCounters()), hot), 0.0: (sum(greedy, SpecCounters()), greedy)})
    assert [row["temperature"] for row in rows] == [0.0, 1.0]
    assert rows[1]["mean_acceptance_length"] == pytest.approx(1 + 120 / 144) and rows[1]["drafts"] == 144
    assert (rows[0]["mean_acceptance_length"] or 0) > (rows[1]["mean_acceptance_length"] or 0)
    assert rows[0]["prompts"] == 12 and len(rows[0]["mean_acceptance_length_interval"]) == 2
    for row in rows:  # each cumulative rate's interval is over the prompts, within [0, 1]
        assert row["per_position_interval_over"] == "prompts"
        for rate, (low, high) in zip(row["per_position"], row["per_position_interval"], strict=True):
            assert 0 <= low <= rate <= high <= 1
    assert rows[0]["per_position_interval"][3][0] < rows[0]["per_position"][3] < rows[0]["per_position_interval"][3][1]
    assert rows[1]["per_position_interval"] == [[0.5, 0.5], [0.25, 0.25], [1 / 12, 1 / 12], [0.0, 0.0]]  # alike prompts
    alone = metrics.by_temperature({0.7: (sum(hot, SpecCounters()), None)})  # no per-prompt counts: no interval at all
    assert "mean_acceptance_length_interval" not in alone[0] and "prompts" not in alone[0]
    assert alone[0]["per_position_interval"] == [] and alone[0]["per_position"]  # the rates stand, exact for the prompts


def test_a_temperature_that_drafted_nothing_has_no_rates_and_no_position_intervals():
    silent = [SpecCounters(drafts=0, draft_tokens=0, accepted=0, per_position=(0, 0, 0, 0))] * 8
    (row,) = metrics.by_temperature({0.7: (sum(silent, SpecCounters(per_position=(0, 0, 0, 0))), silent)})
    assert row["mean_acceptance_length"] is None and row["per_position"] == [] and row["per_position_interval"] == []
