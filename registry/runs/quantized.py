"""Reads for a quantized pair: its AL change against the unquantized pair it derives from (issue 53 §2).

A quantized checkpoint names the repo it was made from (kernel.quantized.base_of), and the worker records both sides'
quantization in the run's environment. The pair it derives from is the one with the base in its place, the same
method, k and options; its newest finished public run on the same suite, build and hardware is paired with this run
prompt by prompt (kernel.quantized.al_change). No engine starts: both runs kept each prompt's counters.
"""

from __future__ import annotations

from typing import Any, TypedDict

from django.core.cache import cache

from kernel import quantized
from registry.models import CertificationRun, Pair
from registry.states import RunState

# Said on the page and in the API: what greedy equivalence was judged against, by which side is quantized.
JUDGED_QUANTIZED = "Greedy equivalence is judged against the quantized verifier this pair serves, not its base."
JUDGED_BASE = "Greedy equivalence is judged against the verifier, which is not quantized."


class QuantizedComparison(TypedDict):
    """A quantized pair's run against its unquantized pair's, or why there is none."""

    quantized: dict[str, quantized.Side]  # by role: the scheme, and the base it names
    derives_from: str  # "draft-base with verifier-base", as people name a pair
    against_run: int | None  # the unquantized pair's run paired with this one
    change: quantized.AlChange | None
    text: str  # the change in one line, or "not compared: ..."
    equivalence: str


def quantized_comparison(*, run: CertificationRun | None) -> QuantizedComparison | None:
    """None unless `run` is a finished run of a pair with a quantized checkpoint."""
    document: Any = run.result if run is not None else None
    environment = document.get("environment") if isinstance(document, dict) else None
    found = quantized.sides(environment.get("quantization") if isinstance(environment, dict) else None)
    if run is None or not found:
        return None
    pair = run.pair
    draft = _base(found, "draft", pair.draft.repo_id if pair.draft else None)
    verifier = _base(found, "verifier", pair.verifier.repo_id)
    named = f"{draft or pair.method} with {verifier}"
    judged = JUDGED_QUANTIZED if "verifier" in found else JUDGED_BASE
    shown: QuantizedComparison = {"quantized": found, "derives_from": named, "against_run": None, "change": None,
                                  "text": "", "equivalence": judged}  # fmt: skip
    if any(side["base_model"] is None for side in found.values()):
        return {**shown, "text": "not compared: the quantized checkpoint names no base_model (with base_model_relation "
                "quantized), so SpecHub cannot tell which pair it derives from"}  # fmt: skip
    base = _base_run(pair, draft, verifier, "verifier" in found, environment)
    if base is None:
        return {**shown, "text": f"not compared: certify {named} first, on the same suite, build, hardware and k"}
    change, line = _compared(run, base)
    return {**shown, "against_run": base.pk, "change": change, "text": line}


def _base(found: dict[str, quantized.Side], role: str, own: str | None) -> str | None:
    side = found.get(role)
    return side["base_model"] if side is not None else own


def _base_run(
    pair: Pair, draft: str | None, verifier: str | None, verifier_quantized: bool, environment: object
) -> CertificationRun | None:
    """The newest finished, unrevoked public suite run of the derived-from pair that pairs with this one per prompt,
    without its document: only each candidate's environment is read."""
    pairs = Pair.objects.filter(method=pair.method, num_speculative_tokens=pair.num_speculative_tokens,
                                verifier__repo_id=verifier, draft__repo_id=draft).exclude(pk=pair.pk)  # fmt: skip
    if not verifier_quantized:  # the verifier itself, at the same commit
        pairs = pairs.filter(verifier__sha=pair.verifier.sha)
    chosen = [p.pk for p in pairs if p.options == pair.options]
    runs = CertificationRun.objects.public().filter(pair__in=chosen, state=RunState.FINISHED, workload__isnull=True,
                                                    hardware=_hardware(environment))  # fmt: skip
    runs = runs.exclude(certificate__revoked_at__isnull=False)  # a revoked run is no reference for anything
    newest = runs.order_by("-finished_at", "-id").values_list("pk", "result__environment")[:20]
    found = next((pk for pk, theirs in newest if quantized.unpaired_reason(environment, theirs) is None), None)
    return CertificationRun.objects.only("pk", "created_at").get(pk=found) if found is not None else None


def _hardware(environment: object) -> object:
    return environment.get("hardware_class") if isinstance(environment, dict) else None


def _compared(ours: CertificationRun, base: CertificationRun) -> tuple[quantized.AlChange | None, str]:
    """The change of run `ours` against run `base`, computed once and kept: a finished run's document never changes,
    and the per-prompt lists grow with the suite (20,000 prompts a side cost seconds a view before issue 61). The key
    holds each run's creation time as well as its id, so that a database that reuses ids reuses no answer."""
    key = f"quantized-change:{ours.pk}:{ours.created_at.timestamp()}:{base.pk}:{base.created_at.timestamp()}"
    kept = cache.get(key)
    if kept is None:
        kept = _paired(ours.pk, base.pk)
        cache.set(key, kept, timeout=None)
    change, line = kept
    return change, line


def _paired(ours: int, base: int) -> tuple[quantized.AlChange | None, str]:
    acceptance = dict(CertificationRun.objects.filter(pk__in=(ours, base))
                      .values_list("pk", "result__stages__speculative__acceptance"))  # fmt: skip
    theirs, mine = (quantized.prompt_counts(acceptance.get(pk)) for pk in (base, ours))
    if theirs is None or mine is None:
        missing = f"run {base}" if theirs is None else "this run"
        return None, f"not compared: {missing} kept no per-prompt counters of its prompts; certify it again to pair them"
    try:
        change = quantized.al_change(theirs, mine)
    except quantized.Unpaired as why:
        return None, f"not compared: {why}"
    return change, f"{quantized.change_text(change)} (against run {base})"
