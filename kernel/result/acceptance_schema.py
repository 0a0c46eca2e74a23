"""The result document's acceptance types: the pair's acceptance, and by k, by prompt length, by temperature and by the
chat template's thinking switch."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from kernel.result.figures import Amount, AtLeastOne, Count, Interval, Share, ShareInterval


class Counts(TypedDict):
    drafts: Count
    draft_tokens: Count
    accepted: Count
    accepted_per_position: list[Count]


class AtK(TypedDict):
    k: AtLeastOne
    mean_acceptance_length: float


class AtLength(TypedDict):
    """Acceptance on the prompts whose length (in the verifier's tokens) lies in (after, up_to]."""

    after: Count
    up_to: Count
    prompts: Count
    mean_acceptance_length: float | None
    mean_acceptance_length_interval: NotRequired[Interval]  # 95 %, over the bucket's prompts; absent below 12 prompts
    prompts_effective: NotRequired[Amount]  # as Acceptance's
    per_position: list[Share]  # cumulative, as Acceptance's


class AtTemperature(TypedDict):
    """Acceptance on the same prompts sampled at `temperature` (top_p 1; 0 is the greedy run's)."""

    temperature: Amount
    mean_acceptance_length: float | None
    mean_acceptance_length_interval: NotRequired[Interval]  # as Acceptance's
    prompts: NotRequired[Count]
    prompts_effective: NotRequired[Amount]
    per_position: list[Share]  # cumulative, as Acceptance's
    # Each rate's 95 % interval: over prompts, as AL's, since issue 56 (`per_position_interval_over` "prompts"; empty
    # where the prompts cannot carry one); before it, Wilson's over drafting steps (no `per_position_interval_over`).
    per_position_interval: list[ShareInterval]
    per_position_interval_over: NotRequired[str]
    drafts: Count


class AtMode(TypedDict):
    """Acceptance on the same prompts rendered with the chat template's switch set one way (issue 53, issue 60)."""

    mode: str  # "thinking on"/"thinking off", or "effort low"/"effort medium"/"effort high"
    chat_template_kwargs: dict[str, bool | str]  # as vLLM's chat API takes it: {"enable_thinking": false}
    mean_acceptance_length: float | None
    mean_acceptance_length_interval: NotRequired[Interval]  # as Acceptance's
    prompts: NotRequired[Count]
    prompts_effective: NotRequired[Amount]
    per_position: list[Share]  # cumulative, as Acceptance's
    drafts: Count


class ModeDifference(TypedDict):
    """How far apart two modes' AL are: the first mode's less the last's, paired per prompt."""

    of: list[str]  # the two modes, as AtMode names them: [first, last]
    mean_acceptance_length: float | None  # AL(first) - AL(second)
    interval: NotRequired[Interval]  # 95 %, paired over prompts (prompt_intervals.difference_interval); absent below 12 prompts
    prompts: Count
    paired_over: str  # "prompts"


class ByMode(TypedDict):
    """Acceptance in each mode of the verifier's chat template's switch, the same prompts, one engine."""

    switch: str  # the template's variable, e.g. "enable_thinking" or "reasoning_effort"
    prompts_as: str  # how the prompts were asked: each the user's one message, or the workload's own chats
    modes: list[AtMode]  # on, then off; or low, medium, high
    difference: ModeDifference
    seconds: NotRequired[Amount]  # the two passes, on the engine the acceptance stage had loaded


class FiguresMode(TypedDict):
    """Which mode the run's own acceptance figures hold for: the prompts as written (no chat template), or rendered
    with the verifier's chat template and these switches ({}: the template's defaults)."""

    rendered: str  # "as written", "chat template", or "chat template, switches differ by request"
    chat_template_kwargs: dict[str, bool | int | float | str | None]


class PerPrompt(TypedDict):
    """Each prompt's own drafting steps and accepted tokens, in suite order: what pairs two runs per prompt (issue 53 §2)."""

    drafts: list[Count]
    accepted: list[Count]


class Acceptance(TypedDict):
    mean_acceptance_length: float | None
    acceptance_rate: Share | None
    per_position: list[Share]  # cumulative: P(positions 1..i all accepted), per drafting step
    counts: Counts
    prompts: NotRequired[Count]  # prompts with their own counters; absent where the engine did not count per request
    mean_acceptance_length_interval: NotRequired[Interval]  # 95 %, over prompts; absent below 12 prompts (quantized.MIN_PROMPTS)
    prompts_effective: NotRequired[Amount]  # Kish's, by drafting steps: under 6 no interval either
    by_k: NotRequired[list[AtK]]  # AL read at each k up to the K that ran (metrics.acceptance_by_k)
    by_length: NotRequired[list[AtLength]]  # by prompt length, from each prompt's own counters (metrics.by_length)
    by_temperature: NotRequired[list[AtTemperature]]  # greedy and at the plan's sampled temperatures, same prompts
    mode: NotRequired[FiguresMode]  # which mode these figures hold for; absent from documents made before issue 53
    by_mode: NotRequired[ByMode]  # where the verifier's chat template takes a thinking switch: on and off, same prompts
    per_prompt: NotRequired[PerPrompt]  # the greedy pass's counters per prompt; absent before issue 53 §2
