"""The toy zoo's heads in the other formats people publish, built from the weights the zoo already has.

- `eagle3-head-raw`: the reduced EAGLE-3 head as SpecForge and the original EAGLE-3 code save heads:
  `"architectures": ["LlamaForCausalLMEagle3"]`, the layer's fields at the top level, the aux layer ids in
  `eagle_config`, and `draft_vocab_size` with the same `d2t`/`t2d` tensors. vLLM maps the architecture to its
  Eagle3LlamaForCausalLM and serves it with `"method": "eagle3"`.

Nothing is trained: `python -m zoo.formats` rewrites the configs beside the committed weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from zoo import ORG

ZOO = Path(__file__).parent / "models"
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


def build_all(org: Path) -> None:
    raw_eagle3(org / "eagle3-head-reduced", org / "eagle3-head-raw")


if __name__ == "__main__":
    build_all(ZOO / ORG)
