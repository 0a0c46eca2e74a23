"""One rule for "faster" everywhere (issue 39 §2), and a stopping label that names the limit that ended the level
(§3): simulations with Stein's rule, the code the throughput stage runs, and every reader of a level's interval."""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

import pytest

from kernel import result, verdict
from kernel.spec import Thresholds
from kernel.stats import t_975
from kernel.verdict import judge_document
from workers import metrics, timing

RULE = metrics.Stein(first=4, most=12, target=0.05)
RUNS = 4000


def certified_c1(rng: random.Random, truth: float, cv: float) -> list[float]:
    """One c=1 level's interval as Stein's rule gives it: lognormal paired ratios around `truth`."""
    ratios = [truth * math.exp(rng.gauss(0, cv)) for _ in range(RULE.most)]
    _, low, high, _ = RULE.interval(ratios[: RULE.total(ratios[: RULE.first])])
    return [low, high]


# At the margin itself the rate is 2.5 % by construction: allow for the simulation's own error there (3 SE).
@pytest.mark.parametrize(("truth", "at_most"), [(1.02, 0.025), (1.03, 0.025 + 3 * math.sqrt(0.025 * 0.975 / RUNS))])
def test_a_gain_under_the_margin_reads_faster_at_most_2_5_percent_of_runs_simulated(truth, at_most):
    rng = random.Random(f"margin-{truth}")
    intervals = [certified_c1(rng, truth, 0.03) for _ in range(RUNS)]
    faster = statistics.fmean(result.speed_label(i) == result.FASTER for i in intervals)
    against_one = statistics.fmean(result.speed_label(i, threshold=1.0) == result.FASTER for i in intervals)
    assert faster <= at_most, f"true {truth}: 'faster' in {faster:.3f} of runs"
    if truth == 1.02:
        assert against_one > 0.10, f"against 1 the row read faster in {against_one:.3f}: the hole this closes"


def document(interval: list[float], *, best_k_interval: list[float] | None = None) -> Any:
    """A judged document with one c=1 level at `interval` (and a best k at another k measured at `best_k_interval`)."""
    level = {"speedup": math.sqrt(interval[0] * interval[1]), "speedup_interval": interval, "block_ratios": [1.0] * 6}
    throughput: dict[str, Any] = {"levels": {"1": level}}
    if best_k_interval is not None:
        measured = {**level, "speedup_interval": best_k_interval}
        predicted = [{"k": 2, "predicted_speedup": 1.1}, {"k": 4, "predicted_speedup": 1.05}]
        throughput["choice_of_k"] = {"run_k": 4, "recipes": {}, "levels": {"1": {"best_k": 2, "predicted": predicted,
                                                                                 "measured": measured}}}  # fmt: skip
    thresholds = {"min_speedup": Thresholds().min_speedup}
    judged = {"verdict": "provisional", "reasons": [], "thresholds": thresholds, "workloads": {}, "environment": {}}
    stages = {"throughput": throughput, "verdict": judged}
    return {"schema_version": result.SCHEMA_VERSION, "stages": stages, "environment": {}, "workloads": {}}


def test_every_reader_of_a_levels_interval_says_the_same_as_the_verdict_constructed():
    under_margin = [1.01, 1.09]  # wholly above 1, not wholly above 1.03
    made = document(under_margin, best_k_interval=under_margin)
    rows = result.speed_by_level(made)
    said = verdict.speed((rows[0]["speedup"], under_margin), Thresholds())["outcome"]
    assert rows[0]["supports"] == said == result.BELOW_MARGIN
    assert result.break_even_bounds(made) == (None, None) and result.summary(made)["faster_up_to"] is None  # type: ignore[index]
    assert [row["supports"] for row in result.best_k_rows(made)] == [result.BELOW_MARGIN]
    clear = document([1.05, 1.2])
    assert result.speed_by_level(clear)[0]["supports"] == result.FASTER and result.break_even_bounds(clear) == (1, None)


def test_the_margin_a_document_was_judged_by_is_the_one_its_rows_apply_constructed():
    made = document([1.04, 1.2])
    made["stages"]["verdict"]["thresholds"]["min_speedup"] = 1.05
    assert result.margin_of(made) == 1.05 and result.speed_by_level(made)[0]["supports"] == result.BELOW_MARGIN
    assert result.margin_of(None) == Thresholds().min_speedup


def test_the_stopping_label_names_the_limit_that_ended_the_level_simulated():
    """At CV 8 %, a level short of the most pairs never reads 'the most pairs reached' (18-23 % of levels did)."""
    rng = random.Random("stopping-labels")
    labels = []
    for _ in range(RUNS):
        ratios = [math.exp(rng.gauss(0, 0.08)) for _ in range(RULE.most)]
        total = RULE.total(ratios[: RULE.first])
        half = RULE.interval(ratios[:total])[3]
        labels.append((total, timing.stopped_by(RULE, total, half)))
    assert all(label != result.NOT_REACHED for total, label in labels if total < RULE.most)
    assert all(label == result.NOT_REACHED for total, label in labels if total >= RULE.most and label != result.REACHED)
    assert {label for _, label in labels} <= {result.REACHED, result.NOT_REACHED, result.SPREAD_LATER}
    assert any(label == result.SPREAD_LATER for _, label in labels)  # the case the old label called "most pairs"


def test_the_verdict_and_the_c1_row_claim_slower_by_one_rule_simulated():
    """Issue 56 §1. A pair 5 % slower at c=1 (CV 3 %) whose higher levels straddle 1 (CV 25 %): the verdict read c=1
    alone and said "slower" while the c=1 row, in the fixed sequence, said "not claimed", in 71-79 % of runs. Both
    now read result.level_claims: they agree in every run, and an interval below 1 that is not claimed says why."""
    rng = random.Random("slower-one-rule")
    runs, disagree, unclaimed = 2000, 0, 0
    for _ in range(runs):
        levels = {}
        for concurrency, true, cv in (("1", 0.95, 0.03), ("2", 1.0, 0.25), ("4", 0.9, 0.25)):
            logs = [rng.gauss(math.log(true), cv) for _ in range(6)]
            centre, half = statistics.fmean(logs), t_975(5) * statistics.stdev(logs) / math.sqrt(6)
            levels[concurrency] = {"speedup": math.exp(centre), "speedup_interval": [math.exp(centre - half),
                                   math.exp(centre + half)], "block_ratios": [math.exp(x) for x in logs]}  # fmt: skip
        made = document([1.0, 1.0])
        made["stages"]["throughput"]["levels"] = levels
        _, _, properties = judge_document(made["stages"], method="draft_model", thresholds=Thresholds(), qualification=None)
        row = result.speed_by_level(made)[0]
        disagree += properties["speed"]["outcome"] != row["supports"]
        unclaimed += row["supports"] == result.NOT_IN_SEQUENCE_SLOWER
    assert disagree == 0
    # The case the review found still happens (c=1 short of its half of the error rate), and reads the same in both;
    # since issue 63 c=1 no longer waits on the levels above it, so most runs claim it.
    assert 0 < unclaimed / runs < 0.5
    assert "the lowest level on half of it" in result.NOT_IN_SEQUENCE_SLOWER  # the label says why
