"""Findings: what a gate rule says about a pair, and the hint for every code.

The hints live here, in one table, so that a code always reads the same way in
the CLI, the submission form and the API.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TypedDict


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


HINTS: dict[str, str] = {
    # format
    "gate:format-config-missing": "Add a config.json at the repo root.",
    "gate:format-config-invalid": "config.json must be one JSON object; fix the syntax and push a new revision.",
    "gate:format-unknown": "Publish the draft in the speculators format, as a plain causal LM, or as a medusa head.",
    "gate:format-missing-key": "Add the key; vLLM reads it when it loads a speculators-format repo.",
    "gate:format-bad-value": "Give the field the type and range shown; vLLM would reject or misread it.",
    "gate:format-default-proposal": "Set speculators_config.default_proposal_method to one of the proposal_types listed.",
    "gate:format-unsupported": "Pick an algorithm the pinned vLLM serves, or wait for SpecHub to move to a vLLM that does.",
    "gate:format-method-mismatch": "Submit the pair with the method the draft's config describes.",
    "gate:format-head-tensors": "Save the EAGLE-1 head's tensors as vLLM loads them: fc.weight (no bias), layers.N.* without a "
    "'model.' prefix and without layer 0's input_layernorm, optionally embed_tokens.weight; no lm_head (the verifier's is used).",
    "gate:format-verifier-config": "The verifier needs a readable config.json with architectures, vocab_size and hidden_size.",
    # verifier
    "gate:verifier-local-path": "Set speculators_config.verifier.name_or_path to the verifier's Hub repo id, not a path on disk.",
    "gate:verifier-name-mismatch": "Pair the draft with the verifier its config names, or fix name_or_path.",
    "gate:verifier-architectures-empty": "List the verifier's architectures in speculators_config.verifier.architectures.",
    "gate:verifier-architectures-mismatch": "The draft was built for another architecture; train it against this verifier.",
    # family (issue 60)
    "gate:family-named": "",
    "gate:family-no-eagle3": "Serve this verifier with a draft_model or n-gram draft, or move to a vLLM whose class for it "
    "implements SupportsEagle3.",
    "gate:family-layer-types": "Give layer_types one entry per layer, each 'sliding_attention' or 'full_attention', as "
    "the family's published config does.",
    "gate:family-sliding-window": "Set sliding_window to the window, in tokens, that the sliding layers attend over.",
    "gate:family-sliding-window-layers": "",
    "gate:family-cpu-unloadable": "Certify it on a GPU worker, or publish the text-only checkpoint (Gemma4ForCausalLM).",
    "gate:family-attention-sinks": "",
    "gate:family-softcap": "",
    "gate:family-assistant-verifier": "Pair a Gemma 4 assistant with the Gemma 4 verifier it was trained for.",
    "gate:family-assistant-backbone": "Pair the assistant with the verifier whose hidden size is its backbone_hidden_size.",
    "gate:family-assistant-vocab": "The assistant must share the verifier's vocabulary; pair it with its own verifier.",
    # tokenizer
    "gate:tokenizer-content": "Draft and verifier must share one tokenizer token for token; retrain with the verifier's.",
    "gate:tokenizer-special-ids": "Use the verifier's bos, eos and pad token ids in the draft's config.",
    "gate:tokenizer-vocab-size": "vLLM's draft_model method needs equal vocab sizes; use a draft with the verifier's vocab.",
    "gate:tokenizer-not-shipped": "Ship tokenizer.json with the draft so that its content can be compared.",
    "gate:tokenizer-shared": "",
    # vocab mapping
    "gate:mapping-missing": "A reduced draft vocab needs t2d and d2t tensors in the safetensors weights.",
    "gate:mapping-t2d": "t2d must be a bool mask over the verifier vocab with exactly draft_vocab_size entries set.",
    "gate:mapping-d2t": "d2t must hold draft_vocab_size offsets with every k + d2t[k] inside the verifier vocab.",
    # geometry
    "gate:geometry-hidden-size": "The head must be built for the verifier's hidden size (target_hidden_size / hidden_size).",
    "gate:geometry-aux-layers": "eagle_aux_hidden_state_layer_ids must be unique, increasing and inside the verifier's layers.",
    "gate:geometry-aux-default": "",
    "gate:geometry-vocab-size": "transformer_layer_config.vocab_size must equal the verifier's vocab_size.",
    "gate:geometry-context": "Served context is capped at the draft's max_position_embeddings; raise it if you need more.",
    "gate:geometry-weights": "The weights' shapes must match the config; re-export the checkpoint.",
    # safety
    "gate:safety-auto-map": "",
    "gate:safety-remote-code": "Publish an architecture vLLM implements; SpecHub never runs code from a repo.",
    "gate:safety-no-safetensors": "Convert the weights to safetensors; SpecHub never unpickles weights.",
    "gate:safety-unsafe-filename": "Rename the file to a plain relative path inside the repo.",
    "gate:safety-code-files": "",
    # k
    "gate:k-range": "Choose a num_speculative_tokens between 1 and the maximum shown.",
    "gate:lossless-rejection-method": "Remove rejection_sample_method from the options (the standard sampler is the default), "
    "or set it to 'standard' or 'block'.",
    "gate:lossless-synthetic": "Remove the synthetic acceptance options: a certificate states what the pair itself does.",
    # options: the engine's newer speculative-config keys
    "gate:options-draft-tp": "Set draft_tensor_parallel_size to 1 or the verifier's tensor-parallel size, or leave it out.",
    "gate:options-bad-value": "Give parallel_drafting and enable_adaptive_verification as true or false.",
    "gate:options-recorded": "",
    "gate:k-divisible": "Choose a num_speculative_tokens divisible by the head's n_predict.",
    "gate:k-trained": "",
    # the verifier's chat template (kernel/formats/chat_template.py)
    "gate:template-thinking": "",
    "gate:template-effort": "",
    "gate:template-switches": "",
    "gate:template-unreadable": "Fix the chat template in tokenizer_config.json: Jinja must parse it for it to render.",
    # quantization (kernel/formats/quantization.py)
    "gate:quantization-served": "",
    "gate:quantization-unknown": "Quantize with a method vLLM implements, and name it in quantization_config.quant_method.",
    "gate:quantization-unreadable": "Give quantization_config a quant_method and, for compressed-tensors, config_groups "
    "with one weights scheme.",
    "gate:quantization-unserved": "Publish the checkpoint in a scheme the pinned build serves (see the reason), or "
    "unquantized; a GPU worker's build may serve more.",
}


class FindingDict(TypedDict):
    """A finding as reports store and the API returns it."""

    rule: str
    code: str
    severity: str
    message: str
    hint: str


@dataclass(frozen=True)
class Finding:
    """One judgement: `code` names the problem, `rule` the rule that found it."""

    rule: str
    code: str
    severity: Severity
    message: str

    @property
    def hint(self) -> str:
        return HINTS[self.code]

    def as_dict(self) -> FindingDict:
        return {"rule": self.rule, "code": self.code, "severity": str(self.severity), "message": self.message, "hint": self.hint}


def finding(code: str, severity: Severity, message: str) -> Finding:
    """Return a Finding whose rule is read from its code (gate:<rule>-<what>)."""
    if code not in HINTS:
        raise KeyError(f"gate code {code!r} has no entry in kernel.formats.findings.HINTS")
    rule = code.removeprefix("gate:").split("-", 1)[0]
    return Finding(rule=rule, code=code, severity=severity, message=message)


def error(code: str, message: str) -> Finding:
    return finding(code, Severity.ERROR, message)


def warning(code: str, message: str) -> Finding:
    return finding(code, Severity.WARNING, message)


def info(code: str, message: str) -> Finding:
    return finding(code, Severity.INFO, message)
