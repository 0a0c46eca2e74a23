"""The verdict says only what the data supports: a speedup is a gain only when its whole interval lies above 1."""

from __future__ import annotations

import pytest

from kernel import result
from kernel.spec import Thresholds
from workers.certification import judge


def judged(speedup: float, interval: list[float]) -> tuple[str, list[str]]:
    """Judge a pair with exact greedy output and a passing sampling test, at this speed."""
    return judge(exact=1.0, p_values=[0.4], speedup_c1=(speedup, interval), thresholds=Thresholds())


def test_a_point_estimate_above_one_with_an_interval_that_straddles_one_is_not_certified_constructed():
    # The n-gram pair's demo figures: 1.03 at c=1, interval [0.91, 1.17].
    level, reasons = judged(1.03, [0.91, 1.17])
    assert level == "provisional"
    assert reasons == [
        "speed at concurrency 1: no measurable difference (speedup 1.03, 95 % interval [0.91, 1.17]; "
        "a gain needs the whole interval above 1.0)"
    ]


def test_a_gain_whose_interval_clears_one_is_certified_constructed():
    assert judged(1.4, [1.25, 1.55]) == ("certified", [])


def test_a_measured_loss_is_said_to_be_slower_constructed():
    level, reasons = judged(0.8, [0.7, 0.9])
    assert level == "provisional" and "slower" in reasons[0]


def test_greedy_divergence_fails_whatever_the_speed_constructed():
    assert judge(exact=0.9, p_values=[], speedup_c1=(2.0, [1.9, 2.1]), thresholds=Thresholds())[0] == "failed"


@pytest.mark.parametrize(
    ("interval", "label"),
    [
        ([1.01, 1.2], "faster"),
        ([0.8, 0.99], "slower"),
        ([0.95, 1.05], "no measurable difference"),
        ([1.0, 1.3], "no measurable difference"),
        ([], "not measured"),
    ],
)
def test_each_interval_gets_the_label_it_supports(interval, label):
    assert result.speed_label(interval) == label


def test_break_even_is_bounded_by_the_levels_measurably_faster_and_slower_constructed():
    levels = {
        str(c): {"speedup": s, "speedup_interval": iv}
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
