"""The toy zoo's heads in the other formats people publish, built from the weights the zoo already has.

- `eagle3-head-raw`: the reduced EAGLE-3 head as SpecForge and the original EAGLE-3 code save heads:
  `"architectures": ["LlamaForCausalLMEagle3"]`, the layer's fields at the top level, the aux layer ids in
  `eagle_config`, and `draft_vocab_size` with the same `d2t`/`t2d` tensors. vLLM maps the architecture to its
  Eagle3LlamaForCausalLM and serves it with `"method": "eagle3"`.
- `eagle1-head`: an EAGLE-1 head as the EAGLE code publishes one (yuhuili/EAGLE-LLaMA3-Instruct-8B): a plain
  `LlamaForCausalLM` config with one layer, told apart from a one-layer draft model only by its tensors (`fc.weight`,
  `layers.0.*` without the `model.` prefix, no `lm_head`, no first input norm).
- `eagle1-head-wrapped`: the same head in vLLM's legacy wrapper (`"model_type": "eagle"`, the layer's config under
  `model`), as vLLM's old EAGLE conversion wrote it.
- `mtp-speculator`: a speculators-format config of type `mtp` (the speculators library's FastMTP), which vLLM 0.32's
  speculators reader does not load.

Nothing is trained, and nothing here is committed: `zoo/variants.py` builds these repos from the committed weights
(`python -m zoo.variants`) and holds them to the digests in BUILD.json. The EAGLE-1 head is
derived, deterministically, from the distilled one-layer draft: its layer, its embeddings, and an `fc` that passes the
token's embedding through, scaled the way the draft's first input norm would (the verifier's hidden state is given
weight 0). vLLM applies the verifier's lm_head to the head's output.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

CARD = "---\nlicense: apache-2.0\nlibrary_name: transformers\ntags: [spechub-toy]\n---\n\n# {title}\n\n{body}\n"
LAYER_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
              "head_dim", "vocab_size", "max_position_embeddings", "rms_norm_eps", "hidden_act", "bos_token_id",
              "eos_token_id", "pad_token_id", "tie_word_embeddings", "attention_bias", "mlp_bias")  # fmt: skip


def raw_eagle3_config(speculators: dict[str, Any]) -> dict[str, Any]:
    """A speculators-format EAGLE-3 config as the raw format writes the same head."""
    layer = speculators["transformer_layer_config"]
    config = {key: layer[key] for key in LAYER_KEYS if key in layer}
    config.update(
        architectures=["LlamaForCausalLMEagle3"],
        model_type="llama",
        rope_theta=layer["rope_parameters"]["rope_theta"],
        torch_dtype=speculators["dtype"],
        draft_vocab_size=speculators["draft_vocab_size"],
        target_hidden_size=speculators["target_hidden_size"],
        eagle_config={
            "eagle_aux_hidden_state_layer_ids": speculators["eagle_aux_hidden_state_layer_ids"],
            "use_aux_hidden_state": True,
        },
    )
    return config


def raw_eagle3(source: Path, target: Path) -> Path:
    """Re-save the speculators-format head at `source` in the raw EAGLE-3 format at `target`."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "model.safetensors", target / "model.safetensors")
    config = raw_eagle3_config(json.loads((source / "config.json").read_text()))
    (target / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    body = f"The weights of {source.name}, with the config SpecForge and the EAGLE-3 code write (LlamaForCausalLMEagle3)."
    (target / "README.md").write_text(CARD.format(title="Toy EAGLE-3 head, raw EAGLE-3 format", body=body))
    return target


# The tensors of one decoder layer an EAGLE-1 head keeps; layer 0 has no input norm (the fc output goes straight in).
EAGLE1_LAYER = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                "mlp.up_proj", "mlp.down_proj", "post_attention_layernorm")  # fmt: skip


def _mean_rms(embeddings: torch.Tensor) -> float:
    """The embeddings' mean RMS in exactly rounded sums (math.fsum), so every CPU builds the same bytes whatever order
    its vector units add in: the variants are rebuilt on each clone and held to BUILD.json's digests."""
    rows = embeddings.double().square().tolist()  # a bf16 squared is exact in float64
    return math.fsum(math.sqrt(math.fsum(row) / len(row)) for row in rows) / len(rows)


def eagle1_weights(draft: Path) -> dict[str, torch.Tensor]:
    """An EAGLE-1 head's tensors from the one-layer draft's: fc feeds the layer the embedding its input norm expected."""
    weights = load_file(str(draft / "model.safetensors"))
    embeddings = weights["model.embed_tokens.weight"]
    norm = weights["model.layers.0.input_layernorm.weight"].tolist()
    # RMSNorm divides by each token's RMS; a linear fc can only divide by the mean one.
    mean_rms = _mean_rms(embeddings)
    passthrough = torch.diag(torch.tensor([weight / mean_rms for weight in norm], dtype=torch.float64))
    fc = torch.cat([passthrough, torch.zeros_like(passthrough)], dim=1)  # [hidden, embedding ++ verifier hidden]
    head = {"fc.weight": fc.to(embeddings.dtype), "embed_tokens.weight": embeddings}
    head.update({f"layers.0.{name}.weight": weights[f"model.layers.0.{name}.weight"] for name in EAGLE1_LAYER})
    return {name: tensor.contiguous() for name, tensor in sorted(head.items())}


def plain_config(draft: Path) -> dict[str, Any]:
    """The draft's config without the keys transformers adds that an EAGLE-1 release does not carry."""
    config: dict[str, Any] = json.loads((draft / "config.json").read_text())
    return {
        key: value
        for key, value in config.items()
        if key in (*LAYER_KEYS, "architectures", "model_type", "rope_parameters", "dtype")
    }


def write_repo(target: Path, config: Mapping[str, object], weights: dict[str, torch.Tensor], title: str, body: str) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(target / "model.safetensors"), metadata={"format": "pt"})
    (target / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (target / "README.md").write_text(CARD.format(title=title, body=body))
    return target


def eagle1(draft: Path, target: Path) -> Path:
    body = (f"An EAGLE-1 head as the EAGLE code publishes one: a plain LlamaForCausalLM config with one layer, and the "
            f"tensors fc.weight, embed_tokens.weight and layers.0.* (no lm_head). Not trained: derived from {draft.name} "
            "(its layer and embeddings; fc passes the token's embedding through, scaled by the layer's input norm over "
            "the embeddings' mean RMS, and gives the verifier's hidden state weight 0). Serve with method eagle.")  # fmt: skip
    return write_repo(target, plain_config(draft), eagle1_weights(draft), "Toy EAGLE-1 head (plain LlamaForCausalLM)", body)


def eagle1_wrapped(draft: Path, target: Path) -> Path:
    config = {"architectures": ["EAGLEModel"], "model_type": "eagle", "model": plain_config(draft), "truncated_vocab_size": None}
    body = ("The eagle1-head weights in vLLM's legacy EAGLE wrapper: model_type eagle, the layer's config under model "
            "(vLLM's EAGLEConfig). Not trained.")  # fmt: skip
    return write_repo(target, config, eagle1_weights(draft), "Toy EAGLE-1 head, legacy eagle wrapper", body)


def mtp_config(speculators: dict[str, Any]) -> dict[str, Any]:
    """A speculators-format EAGLE-3 config turned into the speculators library's MTP type."""
    config = {key: value for key, value in speculators.items() if key not in ("draft_vocab_size", "target_hidden_size")}
    config.pop("eagle_aux_hidden_state_layer_ids", None)
    config.pop("norm_before_residual", None)
    config.update(architectures=["FastMTPSpeculator"], speculators_model_type="mtp", num_nextn_predict_layers=1)
    config["speculators_config"] = {**speculators["speculators_config"], "algorithm": "mtp"}
    return config


def mtp(head: Path, draft: Path, target: Path) -> Path:
    """A speculators `mtp` repo; vLLM refuses its config before reading weights, so it ships only the MTP input projection."""
    config = mtp_config(json.loads((head / "config.json").read_text()))
    weights = {"mtp_layers.0.input_proj.weight": eagle1_weights(draft)["fc.weight"]}
    body = ("A speculators-format config of type mtp (the speculators library's FastMTP). vLLM 0.32 does not load this "
            f"type; the weights are only the input projection (the eagle1-head's fc, derived from {draft.name}). "
            "Not trained.")  # fmt: skip
    return write_repo(target, config, weights, "Toy MTP speculator (speculators format)", body)


def build_all(org: Path, into: Path | None = None) -> None:
    """Build the variants from the repos in `org`, into `into` (by default beside them)."""
    into = into or org
    raw_eagle3(org / "eagle3-head-reduced", into / "eagle3-head-raw")
    eagle1(org / "llama-draft-1l", into / "eagle1-head")
    eagle1_wrapped(org / "llama-draft-1l", into / "eagle1-head-wrapped")
    mtp(org / "eagle3-head", org / "llama-draft-1l", into / "mtp-speculator")
