"""The verdict says only what the data supports, property by property, and names whose fault a failure is."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from kernel import result, stats
from kernel.spec import Thresholds
from kernel.verdict import judge_document, rejudge
from tests.support.qualification import record, stages


def judged(qualification=None, method: str = "draft_model", **figures):
    return judge_document(stages(**figures), method=method, thresholds=Thresholds(), qualification=qualification)


def test_a_point_estimate_above_one_with_an_interval_that_straddles_one_is_not_certified_constructed():
    # The n-gram pair's demo figures: 1.03 at c=1, interval [0.91, 1.17].
    level, reasons, properties = judged(speed=(1.03, [0.91, 1.17]))
    assert level == "provisional"
    assert reasons == [
        "speed at concurrency 1: no measurable difference (speedup 1.03, 95 % interval [0.91, 1.17]; "
        "a certified gain needs the whole interval above the margin, 1.03)"
    ]
    assert properties["speed"]["outcome"] == "no measurable difference"


@pytest.mark.parametrize(
    ("interval", "outcome", "level"),
    [
        ([1.04, 1.20], result.FASTER, "certified"),
        ([1.01, 1.02], result.BELOW_MARGIN, "provisional"),  # surely faster, but a 1-2 % gain is not what is certified
        ([1.01, 1.30], result.BELOW_MARGIN, "provisional"),  # faster, but the margin is inside the interval
        ([0.98, 1.02], result.NO_DIFFERENCE, "provisional"),
        ([0.90, 0.99], result.SLOWER_BELOW_MARGIN, "provisional"),  # surely slower, by less than the margin
        ([0.85, 0.96], result.SLOWER, "provisional"),  # wholly under 1 / 1.03
    ],
)
def test_a_certified_gain_clears_the_practical_margin_not_just_one_constructed(interval, outcome, level):
    assert Thresholds().min_speedup == 1.03
    got, reasons, properties = judged(speed=(sum(interval) / 2, interval))
    assert (got, properties["speed"]["outcome"]) == (level, outcome)
    assert all("margin, 1.03" in reason for reason in reasons)


def test_a_gain_whose_interval_clears_one_with_equal_outputs_is_certified_constructed():
    level, reasons, properties = judged()
    assert (level, reasons) == ("certified", [])
    assert [properties[name]["outcome"] for name in ("acceptance", "greedy", "sampling", "speed")] == [
        "measured", "pass", "pass", "faster"
    ]  # fmt: skip


def test_a_measured_loss_is_said_to_be_slower_constructed():
    level, reasons, _ = judged(speed=(0.8, [0.7, 0.9]))
    assert level == "provisional" and "slower" in reasons[0]


def test_greedy_divergence_fails_the_pair_whatever_the_speed_and_names_where_constructed():
    level, reasons, properties = judged(exact=0.75, speed=(2.0, [1.9, 2.1]))
    assert level == "failed"
    assert properties["greedy"]["fault"] == "pair"
    assert "code prompt 3 at token 17" in reasons[0]


def test_a_sampling_rejection_on_a_build_whose_control_fails_is_the_engines_not_the_drafts_constructed():
    level, reasons, properties = judged(record(draft_model="fail"), p_value=1e-9)
    sampling = properties["sampling"]
    assert (sampling["outcome"], sampling["fault"]) == ("not-judgeable", "engine")
    assert sampling["evidence"]["control"] == "draft_model"
    assert sampling["evidence"]["qualification"]["digest"] == record(draft_model="fail")["digest"]
    assert level == "provisional"
    assert reasons == ["sampling not judgeable on this engine build (engine control fails: draft_model: draft_model summary)"]


def test_a_failing_control_makes_even_a_passing_test_not_judgeable_constructed():
    _, _, properties = judged(record(eagle3="fail"), method="eagle3", p_value=0.5)
    assert properties["sampling"]["outcome"] == "not-judgeable"


def test_a_failing_verifier_alone_control_makes_every_method_not_judgeable_constructed():
    _, _, properties = judged(record(**{"verifier-alone": "fail"}), method="ngram", p_value=0.5)
    assert properties["sampling"]["evidence"]["control"] == "verifier-alone"


def test_a_rejection_on_a_build_whose_controls_pass_fails_the_pair_constructed():
    level, reasons, properties = judged(record(eagle3="fail"), method="draft_model", p_value=1e-9)
    assert (properties["sampling"]["outcome"], properties["sampling"]["fault"]) == ("fail", "pair")
    assert level == "failed" and "the pair's fault" in reasons[0]


def test_a_rejection_without_a_qualification_is_not_blamed_on_anyone_constructed():
    level, reasons, properties = judged(None, p_value=1e-9)
    assert (properties["sampling"]["outcome"], properties["sampling"]["fault"]) == ("not-judgeable", None)
    assert level == "provisional" and "no qualification" in reasons[0]


def test_a_rejection_for_a_method_the_build_has_no_control_for_is_not_blamed_constructed():
    _, _, properties = judged(record(), method="mtp", p_value=1e-9)
    assert properties["sampling"]["outcome"] == "not-judgeable"
    assert "no passing mtp control" in properties["sampling"]["reason"]


def test_a_run_without_a_sampling_test_says_so_constructed():
    _, _, properties = judged(p_value=None)
    assert properties["sampling"]["outcome"] == "not-run"


def sampled(*tests: dict[str, Any]) -> result.PropertyVerdict:
    figures = stages()
    figures["equivalence"]["sampling"] = list(tests)
    return judge_document(figures, method="draft_model", thresholds=Thresholds(), qualification=record())[2]["sampling"]


def test_a_consistent_test_short_of_its_power_is_inconclusive_not_a_pass_constructed():
    sampling = sampled({"p_value": 0.6, "samples": 400, "dof": 15, "detectable_tv": 0.19})
    assert sampling["outcome"] == "inconclusive" and sampling["fault"] is None
    assert "detect only TV ≥ 0.19, not a total variation over the binned outcomes ≥ 0.1" in sampling["reason"]


def test_an_older_conditional_test_is_judged_on_the_power_its_samples_had_constructed():
    # Before the joint test: the second token given the modal first, 600 draws of which 310 had that first token.
    old = {"prefix": 0, "given_first_token": 42, "samples": 310, "bins": 9, "dof": 8, "p_value": 0.5, "statistic": 7.0}
    sampling = sampled(old, {**old, "prefix": 1})
    assert sampling["outcome"] == "inconclusive"
    assert sampling["evidence"]["detectable_tv"] == pytest.approx(stats.detectable_tv(310, 8, 0.0005, 0.99))


def test_the_level_is_split_over_the_prefixes_constructed():
    powered = {"samples": 1600, "dof": 15, "detectable_tv": 0.098}
    # 0.0007 would reject one prefix at 0.001; two prefixes test at 0.0005 each.
    two = sampled({**powered, "p_value": 0.0007}, {**powered, "p_value": 0.5})
    assert two["outcome"] == "pass" and two["evidence"]["level"] == 0.0005
    assert sampled({**powered, "p_value": 0.0004}, {**powered, "p_value": 0.5})["outcome"] == "fail"


def test_rejudging_with_a_qualification_changes_only_the_verdict_constructed():
    thresholds = {"greedy_exact_match": 1.0, "sampling_alpha": 0.001, "min_speedup": 1.0}
    verdict = {"verdict": "provisional", "reasons": [], "thresholds": thresholds, "workloads": {}, "environment": {}}
    document: Any = {"spec": {"method": "draft_model"}, "stages": {**stages(p_value=1e-9), "verdict": verdict}}
    judged_again: Any = rejudge(document, record())  # every control passes: the rejection is the pair's
    assert judged_again["stages"]["verdict"]["verdict"] == "failed"
    assert judged_again["stages"]["verdict"]["qualification"]["digest"] == record()["digest"]
    assert judged_again["stages"]["equivalence"] == document["stages"]["equivalence"]
    assert judged_again["stages"]["verdict"]["properties"]["sampling"]["fault"] == "pair"


@pytest.mark.parametrize(
    ("interval", "label"),
    [
        ([1.04, 1.2], "faster"),
        ([1.01, 1.2], "faster, but not by the margin"),
        ([0.8, 0.96], "slower"),
        ([0.8, 0.99], "slower, but not by the margin"),
        ([0.95, 1.05], "no measurable difference"),
        ([1.0, 1.3], "no measurable difference"),
        ([], "not measured"),
    ],
)
def test_each_interval_gets_the_label_it_supports(interval, label):
    assert result.speed_label(interval) == label


def test_faster_is_claimed_only_in_a_fixed_sequence_upward_constructed():
    own = [result.FASTER, result.NO_DIFFERENCE, result.FASTER, result.SLOWER, result.NO_DIFFERENCE]
    assert result.in_sequence(own) == [
        result.FASTER, result.NO_DIFFERENCE, result.NOT_IN_SEQUENCE, result.SLOWER, result.NO_DIFFERENCE,
    ]  # fmt: skip


S, N, L = result.SLOWER, result.NO_DIFFERENCE, result.MACHINE_LIMITED


@pytest.mark.parametrize(
    ("own", "halved", "claimed"),
    [
        # The lowest level clears its half: the others are tested at the full rate, downward from the highest.
        ([S, N, S, S], [True, False, False, False], [S, N, S, S]),
        # It does not: the others on their half only (the highest clears it, the next does not).
        ([S, N, S, S], [False, False, False, True], [result.NOT_IN_SEQUENCE_SLOWER, N, result.NOT_IN_SEQUENCE_SLOWER, S]),
        # Every other level claimed on its half: the lowest inherits it, and is tested at the full rate.
        ([S, S, S], [False, True, True], [S, S, S]),
        # A level the measuring machine paced neither claims nor stops the sequence.
        ([S, S, L], [True, False, False], [S, S, L]),
        ([N, S, L], [False, True, False], [N, S, L]),
    ],
)
def test_slower_spends_its_error_rate_in_two_halves_constructed(own, halved, claimed):
    assert result.slower_claims(own, halved) == claimed


def test_the_level_family_errs_at_most_two_and_a_half_percent_each_way_simulated():
    # Five levels, a true speedup of 1 at each, independent 95 % intervals: on its own, some level read "faster"
    # 11.9 % of the time (the review's figure, for correlated levels; about 12 % here too).
    rng = random.Random(11)
    trials, alone, sequenced = 20_000, 0, 0
    for _ in range(trials):
        logs = [rng.gauss(0, 0.05) for _ in range(5)]  # each level's log speedup, its standard error 0.05
        intervals = [[math.exp(x - 1.96 * 0.05), math.exp(x + 1.96 * 0.05)] for x in logs]
        labels = [result.speed_label(interval, threshold=1.0) for interval in intervals]  # the sequence's own error
        alone += result.FASTER in labels
        sequenced += result.FASTER in result.in_sequence(labels)
    assert alone / trials > 0.10
    assert sequenced / trials <= 0.025 + 3 * (0.025 * 0.975 / trials) ** 0.5


def test_break_even_is_bounded_by_the_levels_measurably_faster_and_slower_constructed():
    levels = {
        str(c): {"speedup": s, "speedup_interval": iv, "block_ratios": [s] * 6}
        for c, s, iv in ((1, 1.5, [1.3, 1.7]), (2, 1.2, [1.05, 1.3]), (4, 1.0, [0.9, 1.1]), (8, 0.8, [0.7, 0.9]))
    }
    document = result.load({"schema_version": 2, "stages": {"throughput": {"levels": levels}}})
    assert result.break_even_bounds(document) == (2, 8)
    assert [row["supports"] for row in result.speed_by_level(document)] == [
        "faster",
        "faster",
        "no measurable difference",
        "slower",
    ]


def test_an_inconclusive_method_control_does_not_let_a_rejection_be_blamed_on_the_pair_constructed():
    _, _, properties = judged(record(draft_model="inconclusive", **{"self-draft": "inconclusive"}), p_value=1e-9)
    assert (properties["sampling"]["outcome"], properties["sampling"]["fault"]) == ("not-judgeable", None)
