"""The draft formats SpecHub knows, each put through the gate's own format rule: which ones the pinned vLLM build
loads, and why the others are refused.

The rows come from the gate's tables (kernel/formats/vllm_support.py), read when asked, so a type added there is a
row here; each row's verdict is what `rules.format_rule` says of a small config in that format, never a word typed
per row. The registry sets real outcomes beside it (registry/catalog/formats.py). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kernel.formats import vllm_support
from kernel.formats.findings import Severity
from kernel.formats.gate import context
from kernel.formats.inputs import GateInput, RepoMetadata
from kernel.formats.rules import format_rule

PROBE_SHA = "0" * 40
VERIFIER_ID = "spechub/format-probe-verifier"
LAYER = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
         "num_key_value_heads": 4, "num_hidden_layers": 1, "vocab_size": 256}  # fmt: skip
VERIFIER = RepoMetadata(VERIFIER_ID, PROBE_SHA, ["config.json"], {**LAYER, "architectures": ["LlamaForCausalLM"],
                        "num_hidden_layers": 4}, None, None)  # fmt: skip


@dataclass(frozen=True)
class FormatRow:
    """One format: how SpecHub names it, the vLLM method it is served with, and the gate's verdict on it."""

    key: str  # stable: what a pair's format maps to (key_of)
    label: str
    method: str | None
    refusal: str = ""  # the gate's reason it is refused; "" where the pinned build loads it
    code: str = ""  # the finding's code


@dataclass(frozen=True)
class _Probe:
    key: str
    label: str
    config: dict[str, Any] | None  # None: no draft repo (ngram, suffix, mtp)
    method: str | None = None
    tensors: tuple[str, ...] = ()


def rows() -> list[FormatRow]:
    """Every format SpecHub knows, as the gate's tables list them now, each with the gate's verdict."""
    return [_judged(probe) for probe in _probes()]


def _probes() -> Iterator[_Probe]:
    known, listed = vllm_support.SPECULATORS_TYPES, list(vllm_support.SPECULATORS_METHOD)  # listed: vLLM's own order
    ordered = [kind for kind in listed if kind in known] + sorted(known - set(listed))
    for kind in [*ordered, *sorted(vllm_support.SPECULATORS_LEGACY_TYPES - known)]:
        yield _Probe(f"speculators:{kind}", f"speculators {kind}" + (" (MTP)" if kind == "mtp" else ""), _speculators(kind))
    for arch in sorted(vllm_support.EAGLE3_ARCHITECTURES):
        yield _Probe(f"eagle3:{arch}", f"raw EAGLE-3 ({arch})", {**LAYER, "architectures": [arch]})
    for arch in sorted(vllm_support.EAGLE1_ARCHITECTURES):
        base = arch.removeprefix("Eagle")
        yield _Probe(f"eagle1:{arch}", f"EAGLE-1 ({base})", {**LAYER, "architectures": [base]}, tensors=("fc.weight",))
    for method in sorted(vllm_support.EAGLE_WRAPPER_METHODS):
        model = {**LAYER, "architectures": ["LlamaForCausalLM"]}
        yield _Probe(f"eagle_wrapper:{method}", f"legacy eagle wrapper ({method})",
                     {"model_type": "eagle", "method": method, "model": model}, tensors=("fc.weight",))  # fmt: skip
    yield _Probe("draft_model", "draft_model", {**LAYER, "architectures": ["LlamaForCausalLM"]})
    for model_type in sorted(vllm_support.GEMMA4_ASSISTANT_TYPES):
        yield _Probe(f"gemma4_assistant:{model_type}", f"Gemma 4 assistant ({model_type})",
                     {"model_type": model_type, "backbone_hidden_size": 64, "text_config": LAYER})  # fmt: skip
    yield _Probe("medusa", "Medusa", {"model_type": "medusa", "num_heads": 4, "hidden_size": 64, "vocab_size": 256})
    yield _Probe("mlp_speculator", "MLP speculator",
                 {"model_type": "mlp_speculator", "n_predict": 4, "emb_dim": 64, "vocab_size": 256})  # fmt: skip
    for method in ("mtp", *sorted(vllm_support.DRAFTLESS_METHODS)):
        label = {"mtp": "MTP (the verifier's own layers)", "ngram": "n-gram"}.get(method, method)
        yield _Probe(method, label, None, method=method)


def _speculators(kind: str) -> dict[str, Any]:
    proposals = [{"proposal_type": "greedy", "speculative_tokens": 4}]
    speculators = {"algorithm": kind, "proposal_methods": proposals, "default_proposal_method": "greedy",
                   "verifier": {"name_or_path": VERIFIER_ID, "architectures": ["LlamaForCausalLM"]}}  # fmt: skip
    return {"speculators_model_type": kind, "architectures": ["Eagle3Speculator"], "speculators_config": speculators,
            "transformer_layer_config": LAYER, "mask_token_id": 0, "aux_hidden_state_layer_ids": [1, 2]}  # fmt: skip


def _judged(probe: _Probe) -> FormatRow:
    draft = None
    if probe.config is not None:
        header: dict[str, Mapping[str, object]] = {name: {"dtype": "F32", "shape": [1]} for name in probe.tensors}
        tensors = {"model.safetensors": header}
        draft = RepoMetadata("spechub/format-probe", PROBE_SHA, ["config.json"], probe.config, None, None, tensors)
    ctx = context(GateInput(verifier=VERIFIER, verifier_id=VERIFIER_ID, draft=draft, method=probe.method))
    # The probe's own config is the gate's to describe, not to judge: only what the rule says of the format counts.
    said = [f for f in format_rule(ctx) if f.severity == Severity.ERROR and f not in ctx.draft.problems]
    first = said[0] if said else None
    return FormatRow(probe.key, probe.label, ctx.method, first.message if first else "", first.code if first else "")


def key_of(*, kind: str, algorithm: str | None, architectures: Sequence[str] | None, method: str) -> str:
    """The row a pair's format belongs to, from its stored format metadata and method ("" where none does)."""
    found = list(architectures or ())
    if kind == "speculators":
        return f"speculators:{algorithm}"
    if kind == "eagle3":
        return next((f"eagle3:{a}" for a in found if a in vllm_support.EAGLE3_ARCHITECTURES), "")
    if kind == "eagle1":
        return next((f"eagle1:{a if a.startswith('Eagle') else 'Eagle' + a}" for a in found), "")
    if kind == "eagle_wrapper":
        return f"eagle_wrapper:{algorithm}"
    if kind == "causal_lm":
        return "draft_model"
    if kind == "gemma4_assistant":
        return f"gemma4_assistant:{algorithm}"
    if kind in ("medusa", "mlp_speculator"):
        return kind
    return method if kind == "none" else ""
