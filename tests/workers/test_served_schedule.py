"""The served schedule's judgements (workers/served_schedule.py), constructed: honoured or not from the counters, and
whether it is the command to serve."""

from __future__ import annotations

from typing import Any

from kernel.schedule import MAX_BATCH, Range
from workers import served_schedule
from workers.engines.base import SpecCounters

RANGES = [Range(1, 1, 3), Range(2, 3, 1), Range(4, MAX_BATCH, 0)]


def test_drafting_at_each_level_is_held_to_the_ks_of_the_batch_sizes_that_level_runs_constructed():
    assert served_schedule.honoured_at(RANGES, 1, SpecCounters(drafts=50, draft_tokens=150))["honoured"]
    fixed_k = served_schedule.honoured_at(RANGES, 1, SpecCounters(drafts=50, draft_tokens=200))  # k = 4: ignored
    assert not fixed_k["honoured"] and "4.00 tokens a step, where the schedule says k 3 for batches 1-1" in fixed_k["drafting"]
    assert served_schedule.honoured_at(RANGES, 2, SpecCounters(drafts=80, draft_tokens=120))["honoured"]  # k 1 and 3 mixed
    assert not served_schedule.honoured_at(RANGES, 2, SpecCounters(drafts=80, draft_tokens=320))["honoured"]
    only_off = [Range(1, MAX_BATCH, 0)]
    assert served_schedule.honoured_at(only_off, 4, SpecCounters())["honoured"]
    assert not served_schedule.honoured_at(only_off, 4, SpecCounters(drafts=3, draft_tokens=12))["honoured"]
    # Requests that start and end together run at the full batch only: nothing drafted is right where it drafts k = 0,
    # and wrong where it drafts k > 0.
    assert served_schedule.honoured_at(RANGES, 4, SpecCounters())["honoured"]
    assert not served_schedule.honoured_at(RANGES, 2, SpecCounters())["honoured"]


def level(low: float, high: float) -> Any:
    return {"speedup": (low + high) / 2, "speedup_interval": [low, high]}


def test_the_schedule_is_served_only_when_faster_than_the_fixed_k_somewhere_and_slower_nowhere_constructed():
    fixed = {"1": level(1.6, 1.9), "4": level(0.7, 0.8)}
    better = {"1": {**level(1.6, 1.9), "honoured": True}, "4": {**level(0.95, 1.05), "honoured": True}}
    served = served_schedule.outcome(RANGES, better, fixed, 4, "vllm serve ...")  # type: ignore[arg-type]
    assert served["serve_it"] and served["why"].endswith("faster than the fixed k=4 at c=4 and slower at none")
    worse = {"1": {**level(1.2, 1.4), "honoured": True}, "4": {**level(0.95, 1.05), "honoured": True}}
    served = served_schedule.outcome(RANGES, worse, fixed, 4, "")  # type: ignore[arg-type]
    assert not served["serve_it"] and "measured slower than it at c=1" in served["why"]
    ignored = {"1": {**level(1.6, 1.9), "honoured": False, "drafting": "4.00 tokens a step"}, "4": better["4"]}
    served = served_schedule.outcome(RANGES, ignored, fixed, 4, "")  # type: ignore[arg-type]
    assert not served["serve_it"] and served["finding"] == "schedule not honoured: c=1: 4.00 tokens a step"
    assert "does not honour the schedule" in served["why"]


def test_each_level_takes_the_k_measured_best_there_and_one_k_everywhere_serves_no_schedule_constructed():
    run = {"1": level(1.6, 1.9), "4": level(0.7, 0.8)}
    chosen = {"1": {"best_k": 2, "measured": level(1.2, 1.4)}, "4": {"best_k": 1, "measured": level(1.05, 1.2)}}
    ranges = served_schedule.composed(run, chosen, 4)  # type: ignore[arg-type]
    assert ranges == [Range(1, 3, 4), Range(4, MAX_BATCH, 1)]  # k = 4 measured faster at c=1 than the predicted 2
    slower = {"1": {"best_k": 4}, "4": {"best_k": 4}}  # the run's k best everywhere, slower at c=4: k = 0 there
    assert served_schedule.composed(run, slower, 4) == [Range(1, 3, 4), Range(4, MAX_BATCH, 0)]  # type: ignore[arg-type]
    faster = {"1": level(1.6, 1.9), "4": level(1.1, 1.3)}
    assert served_schedule.composed(faster, slower, 4) == []  # type: ignore[arg-type]  # k = 4 everywhere: measured


def test_a_schedule_the_engine_will_not_start_with_is_its_finding_and_the_fixed_k_stays_constructed():
    found = served_schedule.not_served(RANGES, 4, "vllm serve ...", "ValueError: ranges must be sorted")
    assert not found["serve_it"] and not found["honoured"] and "ValueError: ranges must be sorted" in str(found["finding"])
