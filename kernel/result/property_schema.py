"""The result document's judged properties: each with its outcome, whose fault a failure is, and its evidence."""

from __future__ import annotations

from typing import TypedDict

from kernel.result.figures import Amount, Count, Ratio, RatioInterval, Share


class Divergence(TypedDict):
    """Where a greedy output with speculation first differs from the verifier alone's."""

    prompt: Count
    token: Count


class DivergenceIn(Divergence):
    category: str  # the workload the prompt is from


class Cause(TypedDict):
    """A likely cause of a low acceptance, with what shows it (kernel/diagnosis.py, issue 53)."""

    code: str
    cause: str
    evidence: list[str]


class Evidence(TypedDict, total=False):
    """What a property's judgement rests on; each property states its own (kernel/verdict.py)."""

    exact_match: Share  # greedy
    divergences: list[DivergenceIn]  # greedy: each prompt's first divergence
    p_value: Share  # sampling: the lowest over the prefixes
    level: Share  # sampling: the per-prefix level after Bonferroni
    qualification: dict[str, str] | None  # sampling: the engine qualification cited (kernel.qualification.reference)
    control: str  # sampling: the failing engine control that makes it not judgeable
    detectable_tv: Amount  # sampling: the TV its samples detect
    speedup: Ratio  # speed at c=1
    interval: RatioInterval  # speed at c=1: its 95 % interval
    causes: list[Cause]  # acceptance near 1: the likely causes SpecHub checked and found (none: none was in evidence)


class PropertyVerdict(TypedDict):
    """One property's judgement: its outcome, whose fault a failure is (pair, engine, or None), and why."""

    outcome: str
    fault: str | None
    reason: str
    evidence: Evidence


class Properties(TypedDict):
    acceptance: PropertyVerdict
    greedy: PropertyVerdict
    sampling: PropertyVerdict
    speed: PropertyVerdict
