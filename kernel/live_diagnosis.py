"""A live window's low acceptance named: what SpecHub can check from a deployment's counters, and what it cannot
(issue 53 §3).

A watcher pushes only vLLM's spec-decode counters. Of the six causes kernel.diagnosis knows, the counters show one:
the tokens drafted a step (k), from the per-position vector's length, or, where the server exposes no per-position
labels, from draft tokens over drafting steps. The other five need the served configuration, which the counters do
not carry: each is named as "not checkable from counters", with what to check and the certified value to check it
against (from the certified run's document, through kernel.diagnosis.served_by).

Pure: no Django; the registry calls `named` when a window reads "collapse", or "below" with AL near 1.
"""

from __future__ import annotations

from typing import TypedDict

from kernel import diagnosis
from kernel.live import BELOW, COLLAPSE, Counts, acceptance_length
from kernel.result.property_schema import Cause

DRAFTS_PER_STEP = "drafts-per-step"  # the k a server drafted, against the certified k
CAUSES = {DRAFTS_PER_STEP: "the deployment drafts another number of tokens a step than was certified", **diagnosis.CAUSES}


class Unchecked(TypedDict):
    """A cause the counters cannot show, and what its owner should check."""

    code: str
    cause: str
    check: str


class Named(TypedDict):
    checked: str  # what the counters show of k, a cause or not
    causes: list[Cause]  # shown by the counters, with the evidence
    unchecked: list[Unchecked]  # not checkable from counters


def is_low(verdict: str, counts: Counts) -> bool:
    """A window SpecHub names causes for: "collapse", or "below" with AL near 1 or near-zero acceptance."""
    rate = counts.accepted / counts.draft_tokens if counts.draft_tokens else None
    return verdict == COLLAPSE or (verdict == BELOW and diagnosis.is_low(acceptance_length(counts), rate))


def named(counts: Counts, k_served: int | None, k_certified: int, certified: diagnosis.Setup | None) -> Named:
    """The causes of a low window: k from the counters, the rest with what to check against what was certified."""
    causes: list[Cause] = []
    drafted = _drafted(counts, k_served)
    checked = f"{drafted} tokens drafted a step in this window; certified k={k_certified}"
    if drafted is None:
        checked = "the counters do not show the tokens drafted a step"
    elif drafted != k_certified:
        causes.append({"code": DRAFTS_PER_STEP, "cause": CAUSES[DRAFTS_PER_STEP], "evidence": [checked]})
    unchecked = [_unchecked(code, certified or diagnosis.Setup()) for code in diagnosis.CAUSES]
    return {"checked": checked, "causes": causes, "unchecked": unchecked}


def _drafted(counts: Counts, k_served: int | None) -> int | None:
    """The per-position labels' count, else draft tokens a drafting step where that is a whole number."""
    if k_served is not None:
        return k_served
    if counts.drafts and counts.draft_tokens % counts.drafts == 0:
        return counts.draft_tokens // counts.drafts
    return None


def _unchecked(code: str, certified: diagnosis.Setup) -> Unchecked:
    return {"code": code, "cause": diagnosis.CAUSES[code], "check": _check(code, certified)}


def _check(code: str, certified: diagnosis.Setup) -> str:
    """What to check in the served configuration, and the certified value where the certified run's document says."""
    checks = {
        diagnosis.METHOD_FORMAT: f"the speculative config's method (certified: {certified.method or 'unknown'}) "
        "against the draft checkpoint's format (`spechub gate`)",
        diagnosis.DRAFT_REVISION: f"the speculative config's model and revision (certified: {certified.draft or 'no draft'}); "
        "a method that needs a draft and names none loads the verifier as its own draft",
        diagnosis.VOCABULARY: "that the served draft loads the certified draft's tokenizer, with no tokenizer override",
        diagnosis.QUANTIZED_TARGET: f"the served verifier's quantization (--quantization, or its config's "
        f"quantization_config) against the certified {certified.verifier or 'verifier'}",
        diagnosis.LOSSY_REJECTION: "that the speculative config sets no rejection_sample_method other than the "
        "standard one, and no synthetic acceptance",
        diagnosis.THINKING_MODE: f"the requests' chat_template_kwargs (enable_thinking) against the certified mode "
        f"({_mode(certified)})",
    }  # fmt: skip
    return checks[code]


def _mode(certified: diagnosis.Setup) -> str:
    if certified.chat_template_kwargs is None:
        return "the one the certificate names"
    switch = diagnosis.thinking(certified.chat_template_kwargs)
    return "thinking as the template defaults" if switch is None else f"thinking {'on' if switch else 'off'}"


def text(found: Named) -> str:
    """One line for the window's reason: what the counters show, then what they cannot."""
    shown = [f"{c['cause']} ({'; '.join(c['evidence'])})" for c in found["causes"]]
    head = f"likely cause: {'; '.join(shown)}" if shown else f"checked from the counters: {found['checked']}"
    rest = "; ".join(f"{u['cause']}: check {u['check']}" for u in found["unchecked"])
    return f"{head}. Not checkable from counters: {rest}"
