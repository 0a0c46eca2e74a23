"""The gate's rules on a pair's speculative-config options: what keeps speculation lossless, and what the engine's
newer keys must hold (issue 54 §4).

vLLM's `rejection_sample_method` is `standard` (probabilistic rejection sampling) or `block` (block verification,
Sun et al., which verifies the drafts jointly and keeps the verifier's distribution): both lossless. `synthetic`
accepts drafts at an invented rate, and `fly` (proposed) accepts drafts the verifier's own sampler would reject:
neither is lossless, and nor is any `synthetic_acceptance_*` key. `draft_tensor_parallel_size` must be 1 or the
verifier's own tensor-parallel size, as vLLM requires. `parallel_drafting` and `enable_adaptive_verification` change
how the pair drafts and verifies, so the spec (its options) and the recipe (its config) carry them, and the gate says so.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from kernel.formats.fields import brief
from kernel.formats.findings import Finding, error, info
from kernel.formats.inputs import GateInput


class Context(Protocol):
    """What these rules read of the rules' Context (rules.py imports this module for RULES, so not Context itself)."""

    @property
    def input(self) -> GateInput: ...


LOSSLESS_REJECTION = ("standard", "block")
# Why each known lossy method is refused; any other value is refused as one SpecHub does not know to be lossless.
LOSSY_REJECTION = {
    "synthetic": "it accepts drafts at an invented rate",
    "fly": "it accepts drafts the verifier's own sampler would reject",
}
SYNTHETIC = "synthetic_acceptance_"  # synthetic_acceptance_rates, synthetic_acceptance_length, and any later one
RECORDED = ("parallel_drafting", "enable_adaptive_verification")


def not_lossless(options: Mapping[str, object]) -> Iterator[tuple[str, str]]:
    """(code, message) for each pair option that makes speculation not lossless as SpecHub certifies it."""
    method = options.get("rejection_sample_method", "standard")
    if method not in LOSSLESS_REJECTION:
        why = LOSSY_REJECTION.get(str(method), "SpecHub knows it to be no lossless sampler")
        yield ("gate:lossless-rejection-method",
               f"rejection_sample_method is {brief(method)!r}, which is not lossless: {why}. SpecHub certifies "
               f"{' and '.join(LOSSLESS_REJECTION)} only, the samplers that keep the verifier's distribution.")  # fmt: skip
    for key in sorted(key for key in options if key.startswith(SYNTHETIC)):
        yield ("gate:lossless-synthetic",
               f"{brief(key)} sets an invented acceptance, which is not lossless: the counters and the outputs would "
               "be made up.")  # fmt: skip


def lossless_rule(ctx: Context) -> Iterator[Finding]:
    """Pair options may not make speculation lossy: a lossless rejection method only, no synthetic acceptance."""
    for code, message in not_lossless(ctx.input.options):
        yield error(code, message)


def options_rule(ctx: Context) -> Iterator[Finding]:
    """The engine's newer keys: the draft's tensor parallelism fits the verifier's; the drafting switches are booleans,
    recorded."""
    options, target = ctx.input.options, ctx.input.tensor_parallel_size
    tp = options.get("draft_tensor_parallel_size")
    if tp is not None and (type(tp) is not int or tp not in (1, target)):
        yield error("gate:options-draft-tp", f"draft_tensor_parallel_size is {brief(tp)!r}; vLLM takes 1 or the "
                    f"verifier's tensor-parallel size, {target} here.")  # fmt: skip
    said = {key: options[key] for key in RECORDED if key in options}
    for key, value in said.items():
        if type(value) is not bool:
            yield error("gate:options-bad-value", f"{key} must be true or false, not {brief(value)!r}.")
    if said and all(type(value) is bool for value in said.values()):
        named = ", ".join(f"{key} {str(value).lower()}" for key, value in said.items())
        yield info("gate:options-recorded", f"Served with {named}: the run's spec and the serving recipe carry it.")
