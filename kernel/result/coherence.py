"""What a result document's figures must say of one another (issue 61 §3): an interval holds its point, AL lies in
[1, k + 1], a run's k drafted positions, no more accepted tokens than drafted ones.

Each is a kernel.typed rule on one of the TypedDicts the readers use, read once its fields have their types and their
meanings (figures.py); `rules(k=...)` gives them for a run that drafted k tokens a step.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from kernel.result.acceptance_schema import Acceptance, AtK, AtLength, AtMode, AtTemperature, Counts, ModeDifference
from kernel.result.property_schema import Evidence
from kernel.result.schema import KSpeed, Level, RatePoint, ScheduleLevel
from kernel.typed import SLACK, Rule

Figures = Mapping[str, Any]


def rules(*, k: int) -> dict[Any, Rule]:
    """The rules for a run whose spec drafted `k` tokens a step (num_speculative_tokens)."""
    acceptance = partial(_acceptance, k=k)
    return {
        Acceptance: acceptance,
        AtLength: acceptance,
        AtMode: acceptance,
        AtTemperature: partial(_at_temperature, k=k),
        AtK: _at_its_own_k,
        KSpeed: _at_its_own_k,
        ModeDifference: partial(_difference, k=k),
        Counts: _counted,
        Level: _speedup_held,
        RatePoint: _speedup_held,
        ScheduleLevel: _speedup_held,
        Evidence: _speed_held,
    }


def _acceptance(figures: Figures, where: str, *, k: int) -> str | None:
    return (
        _length(figures, where, k)
        or _held(figures, where, "mean_acceptance_length_interval", "mean_acceptance_length")
        or _positions(figures, where, k)
    )


def _length(figures: Figures, where: str, k: int) -> str | None:
    """AL counts the verifier's own token each step and at most the k drafted ones besides: from 1 to k + 1."""
    length = figures.get("mean_acceptance_length")
    if length is None or 1 - SLACK <= length <= k + 1 + SLACK:
        return None
    return (f"{where}.mean_acceptance_length must be from 1 to {k + 1} (a step yields its own token and at most the "
            f"k = {k} drafted ones), not {length!r}")  # fmt: skip


def _positions(figures: Figures, where: str, k: int) -> str | None:
    if len(figures["per_position"]) > k:
        return f"{where}.per_position has {len(figures['per_position'])} positions; the run drafted k = {k} a step"
    return None


def _held(figures: Figures, where: str, interval: str, point: str) -> str | None:
    """The interval at `interval`, where there is one, holds the figure at `point`, where there is one."""
    if interval not in figures or figures.get(point) is None:
        return None
    return _holds(figures[interval], figures[point], f"{where}.{interval}", f"{where}.{point}")


def _holds(bounds: list[float], point: float, interval: str, named: str) -> str | None:
    low, high = bounds
    slack = SLACK * max(1.0, abs(point))
    if low - slack <= point <= high + slack:
        return None
    return f"{interval} [{low!r}, {high!r}] does not hold its point, {named} = {point!r}"


def _at_temperature(figures: Figures, where: str, *, k: int) -> str | None:
    """As acceptance, and each position's interval, where there are any, holds its position's rate."""
    if wrong := _acceptance(figures, where, k=k):
        return wrong
    rates, intervals = figures["per_position"], figures["per_position_interval"]
    if intervals and len(intervals) != len(rates):
        return f"{where}.per_position_interval has {len(intervals)} intervals for {len(rates)} positions: one each, or none"
    for i, (bounds, rate) in enumerate(zip(intervals, rates, strict=False)):
        if wrong := _holds(bounds, rate, f"{where}.per_position_interval[{i}]", f"{where}.per_position[{i}]"):
            return wrong
    return None


def _at_its_own_k(figures: Figures, where: str) -> str | None:
    return _length(figures, where, figures["k"])


def _difference(figures: Figures, where: str, *, k: int) -> str | None:
    """Two ALs, each from 1 to k + 1, differ by at most k either way."""
    apart = figures.get("mean_acceptance_length")
    if apart is not None and abs(apart) > k + SLACK:
        return (f"{where}.mean_acceptance_length, one AL less another, must be from {-k} to {k} (k = {k}), "
                f"not {apart!r}")  # fmt: skip
    return _held(figures, where, "interval", "mean_acceptance_length")


def _counted(counts: Figures, where: str) -> str | None:
    if counts["accepted"] > counts["draft_tokens"]:
        return f"{where}.accepted ({counts['accepted']}) is more than {where}.draft_tokens ({counts['draft_tokens']})"
    return None


def _speedup_held(level: Figures, where: str) -> str | None:
    return _held(level, where, "speedup_interval", "speedup")


def _speed_held(evidence: Figures, where: str) -> str | None:
    return _held(evidence, where, "interval", "speedup")
