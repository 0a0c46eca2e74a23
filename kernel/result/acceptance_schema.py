"""The result document's acceptance types: the pair's acceptance, and by k, by prompt length and by temperature."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class Counts(TypedDict):
    drafts: int
    draft_tokens: int
    accepted: int
    accepted_per_position: list[int]


class AtK(TypedDict):
    k: int
    mean_acceptance_length: float


class AtLength(TypedDict):
    """Acceptance on the prompts whose length (in the verifier's tokens) lies in (after, up_to]."""

    after: int
    up_to: int
    prompts: int
    mean_acceptance_length: float | None
    mean_acceptance_length_interval: NotRequired[list[float]]  # 95 %, over the bucket's prompts; absent below 8
    prompts_effective: NotRequired[float]  # as Acceptance's
    per_position: list[float]  # cumulative, as Acceptance's


class AtTemperature(TypedDict):
    """Acceptance on the same prompts sampled at `temperature` (top_p 1; 0 is the greedy run's)."""

    temperature: float
    mean_acceptance_length: float | None
    mean_acceptance_length_interval: NotRequired[list[float]]  # as Acceptance's
    prompts: NotRequired[int]
    prompts_effective: NotRequired[float]
    per_position: list[float]  # cumulative, as Acceptance's
    # Each rate's 95 % interval: over prompts, as AL's, since issue 56 (`per_position_interval_over` "prompts"; empty
    # where the prompts cannot carry one); before it, Wilson's over drafting steps (no `per_position_interval_over`).
    per_position_interval: list[list[float]]
    per_position_interval_over: NotRequired[str]
    drafts: int


class Acceptance(TypedDict):
    mean_acceptance_length: float | None
    acceptance_rate: float | None
    per_position: list[float]  # cumulative: P(positions 1..i all accepted), per drafting step
    counts: Counts
    prompts: NotRequired[int]  # prompts with their own counters; absent where the engine did not count per request
    mean_acceptance_length_interval: NotRequired[list[float]]  # 95 %, over prompts; absent below 8 prompts
    prompts_effective: NotRequired[float]  # Kish's, by drafting steps: under 6 no interval either
    by_k: NotRequired[list[AtK]]  # AL read at each k up to the K that ran (metrics.acceptance_by_k)
    by_length: NotRequired[list[AtLength]]  # by prompt length, from each prompt's own counters (metrics.by_length)
    by_temperature: NotRequired[list[AtTemperature]]  # greedy and at the plan's sampled temperatures, same prompts
