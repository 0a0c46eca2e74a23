"""Acceptance by the chat template's modes: its thinking switch on and off (issue 53), or gpt-oss's reasoning effort
at low, medium and high (issue 60). The run's prompts are rendered in each mode and asked of the speculative engine
the acceptance stage already holds (no engine of its own); the modes' AL are set side by side, each with its interval
over prompts, and the first mode's less the last's is paired per prompt.

A bundled suite's prompts are plain text: each is asked as the user's one message. A workload's chat requests keep
their own messages and switches, the thinking switch set each way over them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from kernel.errors import UserError
from kernel.result import AtMode, ByMode, FiguresMode, ModeDifference
from kernel.traffic import ChatTemplate, Request, render
from kernel.traffic.templates import MODE_SWITCHES, ModeValue, with_switch
from workers import metrics, prompt_intervals
from workers.engines.base import SpecCounters
from workers.suites import tokenize
from workers.workbench import Counted, Workbench

Batches = dict[str, list[list[int]]]  # token ids by category, in the suite's order
Tokenize = Callable[[str], list[int]]


def modes_of(switch: str) -> dict[str, ModeValue]:
    """The switch's modes, in order, with the value each sets."""
    return dict(MODE_SWITCHES[switch])


def rendered(asked: Sequence[Request], template: ChatTemplate, switch: str, encode: Tokenize, room: int) -> dict[str, Batches]:
    """Each mode's prompts as token ids by category, the same prompts in the same order in every mode: a prompt that
    does not fit the context (`room` tokens) in any mode is left out of all."""
    ids = {mode: [encode(render(with_switch(r, switch, value), template)) for r in asked] for mode, value in
           modes_of(switch).items()}  # fmt: skip
    fits = [all(len(found[i]) <= room for found in ids.values()) for i in range(len(asked))]
    found: dict[str, Batches] = {}
    for mode, prompts in ids.items():
        batches: Batches = {}
        for request, prompt, fit in zip(asked, prompts, fits, strict=True):
            if fit:
                batches.setdefault(request.category, []).append(prompt)
        found[mode] = batches
    return found


def measured(bench: Workbench, count: Callable[[Batches], Counted]) -> dict[str, Counted]:
    """Where the verifier's chat template takes a switch measured by mode: `count` (greedy, on the acceptance stage's
    engine) over the run's prompts rendered in each mode; nothing where it takes none."""
    switch = bench.switches.measured
    if switch is None or bench.template is None:
        return {}
    room = bench.spec.plan.max_model_len - bench.suite.max_tokens

    def encode(text: str) -> list[int]:
        return tokenize(bench.paths["verifier"], [text])[0]

    try:
        asked = rendered(bench.suite.asked(), bench.template, switch, encode, room)
    except UserError:  # a template that refuses these prompts as chats (one that needs a system turn): the run's own
        return {}  # figures stand, unmeasured by mode, rather than the extra measurement failing the certification
    return {mode: count(batches) for mode, batches in asked.items()}


def by_mode(switch: str, prompts_as: str, runs: Mapping[str, tuple[SpecCounters, Sequence[SpecCounters] | None]]) -> ByMode:
    """Each mode's AL with its interval over prompts, and the first mode's less the last's, paired per prompt."""
    modes = modes_of(switch)
    rows = [_row(mode, {switch: value}, *runs[mode]) for mode, value in modes.items()]
    compared = [next(iter(modes)), list(modes)[-1]]
    return {"switch": switch, "prompts_as": prompts_as, "modes": rows, "difference": difference(compared, runs)}


def _row(mode: str, kwargs: dict[str, ModeValue], counters: SpecCounters, prompts: Sequence[SpecCounters] | None) -> AtMode:
    figures = metrics.acceptance(counters, prompts)
    row: AtMode = {
        "mode": mode,
        "chat_template_kwargs": kwargs,
        "mean_acceptance_length": figures["mean_acceptance_length"],
        "per_position": figures["per_position"],
        "drafts": counters.drafts,
    }
    for key in ("mean_acceptance_length_interval", "prompts", "prompts_effective"):
        if key in figures:
            row[key] = figures[key]
    return row


def difference(modes: list[str], runs: Mapping[str, tuple[SpecCounters, Sequence[SpecCounters] | None]]) -> ModeDifference:
    """AL(first) - AL(second) on the same prompts, with its 95 % interval paired over them where both carry one."""
    (first, first_prompts), (second, second_prompts) = (runs[mode] for mode in modes)
    centre = None if not (first.drafts and second.drafts) else first.accepted / first.drafts - second.accepted / second.drafts
    found: ModeDifference = {"of": modes, "mean_acceptance_length": centre, "prompts": len(first_prompts or ()),
                             "paired_over": "prompts"}  # fmt: skip
    if first_prompts is not None and second_prompts is not None and len(first_prompts) == len(second_prompts):
        drafts = ([p.drafts for p in first_prompts], [p.drafts for p in second_prompts])
        accepted = ([p.accepted for p in first_prompts], [p.accepted for p in second_prompts])
        interval = prompt_intervals.difference_interval(drafts, accepted)
        if interval is not None:
            found["interval"] = list(interval)
    return found


def figures_mode(asked: Sequence[Request]) -> FiguresMode:
    """Which mode a run's own figures hold for: its prompts as written, or rendered with the template and switches."""
    chats = [r for r in asked if r.messages is not None]
    if not chats:
        return {"rendered": "as written", "chat_template_kwargs": {}}
    settings = {json.dumps(r.chat_template_kwargs or {}, sort_keys=True) for r in chats}
    if len(settings) > 1 or len(chats) < len(asked):
        return {"rendered": "chat template, switches differ by request", "chat_template_kwargs": {}}
    return {"rendered": "chat template", "chat_template_kwargs": dict(chats[0].chat_template_kwargs or {})}


def prompts_as(asked: Sequence[Request]) -> str:
    """How the by-mode passes asked the prompts, for the reader."""
    if all(r.messages is None for r in asked):
        return "each prompt as the user's one message, rendered with the verifier's chat template"
    return "each request's own messages (a plain prompt as the user's one message), rendered with the verifier's chat template"
