"""The gate's chat-template rule: which switches the verifier's chat template takes (issue 53).

A template that takes a thinking switch (`enable_thinking`) renders the same request two ways, and acceptance moves
with the way (one DFlash report: 25 % with thinking on, 60 % off). The gate names the switches, read from the
template's source by Jinja's parser in the sandbox (kernel/traffic/templates.py): nothing in it runs here, and a
certification then measures acceptance with the thinking switch on and off.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from kernel.formats.findings import Finding, info, warning
from kernel.formats.inputs import GateInput
from kernel.traffic.templates import MODE_SWITCHES, ChatTemplate, switches


class _Judged(Protocol):
    """What this rule reads of the rules' Context (rules.py imports this module for RULES, so not Context itself)."""

    @property
    def input(self) -> GateInput: ...


def template_rule(ctx: _Judged) -> Iterator[Finding]:
    """The verifier's chat template: the switches it takes beyond the messages, and its thinking switch if any."""
    found = switches(ChatTemplate.from_tokenizer_config(ctx.input.verifier.tokenizer_config))
    if found.problem:
        yield warning("gate:template-unreadable", f"The verifier's {found.problem}; no switch of it is measured.")
        return
    if not found.names:
        return
    named = ", ".join(found.names)
    if found.thinking:
        yield info("gate:template-thinking", f"The verifier's chat template takes a thinking switch, `{found.thinking}` "
                   f"(its switches: {named}): acceptance is measured with it on and off, on the same prompts.")  # fmt: skip
    elif found.measured:
        values = ", ".join(str(value) for _, value in MODE_SWITCHES[found.measured])
        yield info("gate:template-effort", f"The verifier's chat template takes a reasoning effort, `{found.measured}` "
                   f"(its switches: {named}): acceptance is measured at {values}, on the same prompts.")  # fmt: skip
    else:
        yield info("gate:template-switches", f"The verifier's chat template takes these switches: {named}.")
