"""The static compatibility gate: parse both configs once, run every rule, collect findings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from kernel.formats.findings import Finding, FindingDict, Severity
from kernel.formats.inputs import GateInput
from kernel.formats.parse import NO_DRAFT, DraftFormat, FormatDict, describe_draft, describe_verifier
from kernel.formats.recipe import Recipe, RecipeDict, serving_recipe
from kernel.formats.rules import RULES, Context, Rule
from kernel.formats.vllm_support import VLLM_VERSION

# The k a pair is certified at when neither the pair nor the draft's config names one.
DEFAULT_K = 4


class ReportDict(TypedDict):
    """A report as Pair.compatibility, Submission.validation_report and the compatibility endpoint hold it."""

    compatible: bool
    vllm_version: str
    method: str | None
    num_speculative_tokens: int
    findings: list[FindingDict]
    format: FormatDict
    recipe: RecipeDict | None


@dataclass(frozen=True)
class Report:
    """The gate's judgement of one pair: compatible when no finding is an error."""

    findings: tuple[Finding, ...]
    method: str | None
    k: int
    format: DraftFormat
    recipe: Recipe | None

    @property
    def compatible(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.ERROR]

    def as_dict(self) -> ReportDict:
        """Return the stored form."""
        return {
            "compatible": self.compatible,
            "vllm_version": VLLM_VERSION,
            "method": self.method,
            "num_speculative_tokens": self.k,
            "findings": [f.as_dict() for f in self.findings],
            "format": self.format.as_dict(),
            "recipe": self.recipe.as_dict() if self.recipe else None,
        }


def context(gate_input: GateInput) -> Context:
    """Parse the draft and verifier configs and settle the method and k the pair is judged at."""
    draft, verifier = gate_input.draft, gate_input.verifier
    if draft is None:
        fmt = NO_DRAFT
    else:
        tensors = {name for header in draft.safetensors.values() for name in header}
        fmt = describe_draft(draft.config, tensors=tensors, unreadable=draft.problems.get("config.json"))
    target = describe_verifier(verifier.config, unreadable=verifier.problems.get("config.json"))
    method = gate_input.method or fmt.method
    k = gate_input.k if gate_input.k is not None else (fmt.speculative_tokens or DEFAULT_K)
    return Context(input=gate_input, method=method, k=k, draft=fmt, verifier=target)


def judge(gate_input: GateInput, rules: list[Rule] = RULES) -> Report:
    """Return the findings of every rule, and the serving recipe when nothing refuses the pair."""
    ctx = context(gate_input)
    findings = [found for rule in rules for found in rule(ctx)]
    report = Report(findings=tuple(findings), method=ctx.method, k=ctx.k, format=ctx.draft, recipe=None)
    if not report.compatible or ctx.method is None:
        return report
    draft = gate_input.draft
    recipe = serving_recipe(
        verifier=(gate_input.verifier_id, gate_input.verifier.sha),
        draft=(draft.repo_id, draft.sha) if draft else None,
        method=ctx.method,
        k=ctx.k,
        fmt=ctx.draft,
        options=gate_input.options,
    )
    return Report(findings=report.findings, method=ctx.method, k=ctx.k, format=ctx.draft, recipe=recipe)
