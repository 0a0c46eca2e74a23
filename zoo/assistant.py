"""Gemma 4's MTP assistant for the toy Gemma 4 verifier, in Google's `gemma4_assistant` layout (issue 60).

vLLM serves it as `"method": "mtp"` (its gemma4_mtp model and proposer, vllm/model_executor/models/gemma4_mtp.py and
vllm/v1/spec_decode/gemma4.py). What it computes, and so what this trains:
- its input at the verifier's last position t is [the verifier's embedding of the next token x(t+1), scaled by
  sqrt(backbone hidden size); the verifier's final normed hidden state at t], projected to the assistant's width;
- its decoder layers have queries only: each reads the keys and values the verifier cached at positions up to t, from
  the verifier's last layer of the same attention type (sliding or full), with the query at position t, scale 1;
- its normed output gives the logits through its own lm_head (tied to its own `embed_tokens`, at its own width), and,
  projected back to the backbone's width, the hidden state of its next step, which keeps position t and the same keys.

Training is distillation: the verifier's next-token distribution at t+1+s for step s, the steps teacher-forced with the
corpus's tokens, later steps weighted less. `python -m zoo.families --assistant-only` retrains it alone.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from zoo import ORG
from zoo.train import Schedule, _kl, _optimizer, _update, batches

WIDTH, INTERMEDIATE, STEPS = 64, 256, 3  # the assistant's width (draft-dim, smaller than the backbone's, as published)
EPS = 1e-6


class RMSNorm(nn.Module):
    """vLLM's RMSNorm, as gemma4_mtp builds every norm: x / rms(x) * weight."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS).type_as(x) * self.weight


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Neox-style rotary embedding over the whole head (x: batch x heads x T x head_dim)."""
    half = x.shape[-1] // 2
    inv = 1.0 / theta ** (torch.arange(0, half, dtype=torch.float32) / half)
    angles = positions.float()[..., None] * inv  # batch x T x half
    cos, sin = angles.cos()[:, None], angles.sin()[:, None]
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


class Layer(nn.Module):
    """One assistant decoder layer: query-only attention over the verifier's cache, then Gemma's MLP."""

    def __init__(self, heads: int, head_dim: int, theta: float, window: int | None) -> None:
        super().__init__()
        self.heads, self.head_dim, self.theta, self.window = heads, head_dim, theta, window
        self.q_proj = nn.Linear(WIDTH, heads * head_dim, bias=False)
        self.q_norm = RMSNorm(head_dim)
        self.o_proj = nn.Linear(heads * head_dim, WIDTH, bias=False)
        self.gate_proj = nn.Linear(WIDTH, INTERMEDIATE, bias=False)
        self.up_proj = nn.Linear(WIDTH, INTERMEDIATE, bias=False)
        self.down_proj = nn.Linear(INTERMEDIATE, WIDTH, bias=False)
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(WIDTH), RMSNorm(WIDTH)
        self.pre_feedforward_layernorm, self.post_feedforward_layernorm = RMSNorm(WIDTH), RMSNorm(WIDTH)

    def attend(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """x: batch x T x WIDTH, one query per position t; keys/values: batch x kv_heads x T x head_dim."""
        batch, length, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(batch, length, self.heads, self.head_dim)).transpose(1, 2)
        q = rope(q, torch.arange(length).expand(batch, -1), self.theta)
        repeat = self.heads // keys.shape[1]
        keys, values = keys.repeat_interleave(repeat, dim=1), values.repeat_interleave(repeat, dim=1)
        position = torch.arange(length)
        visible = position[None, :] <= position[:, None]  # query t sees the cache up to t
        if self.window is not None:
            visible &= position[None, :] > position[:, None] - self.window
        scores = (q @ keys.transpose(-1, -2)).masked_fill(~visible, float("-inf"))
        out = scores.softmax(-1) @ values
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))

    def forward(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        x = x + self.post_attention_layernorm(self.attend(self.input_layernorm(x), keys, values))
        mlp = self.down_proj(F.gelu(self.gate_proj(self.pre_feedforward_layernorm(x)), approximate="tanh") * self.up_proj(
            self.pre_feedforward_layernorm(x)
        ))  # fmt: skip
        return x + self.post_feedforward_layernorm(mlp)


class Assistant(nn.Module):
    """pre_projection → layers (one per attention type, reading the verifier's last layer of that type) → norm."""

    def __init__(self, verifier: dict[str, Any]) -> None:
        super().__init__()
        backbone, self.types = verifier["hidden_size"], ["sliding_attention", "full_attention"]
        head_dims = {"sliding_attention": verifier["head_dim"], "full_attention": full_head_dim(verifier)}
        windows = {"sliding_attention": verifier["sliding_window"], "full_attention": None}
        thetas = {kind: verifier["rope_parameters"][kind]["rope_theta"] for kind in self.types}
        self.scale = math.sqrt(backbone)
        self.pre_projection = nn.Linear(2 * backbone, WIDTH, bias=False)
        self.layers = nn.ModuleList(
            Layer(verifier["num_attention_heads"], head_dims[kind], thetas[kind], windows[kind]) for kind in self.types
        )
        self.norm = RMSNorm(WIDTH)
        self.post_projection = nn.Linear(WIDTH, backbone, bias=False)
        self.lm_head = nn.Linear(WIDTH, verifier["vocab_size"], bias=False)

    def step(
        self, embeds: torch.Tensor, hidden: torch.Tensor, cache: dict[str, tuple[torch.Tensor, torch.Tensor]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (logits, the backbone-width hidden state of the next step)."""
        x = self.pre_projection(torch.cat([embeds * self.scale, hidden], dim=-1))
        for kind, layer in zip(self.types, self.layers, strict=True):
            x = layer(x, *cache[kind])
        drafted = self.norm(x)
        return self.lm_head(drafted), self.post_projection(drafted)

    def checkpoint(self) -> dict[str, torch.Tensor]:
        """The weights under the names vLLM's gemma4_mtp loader reads (lm_head is saved as the tied embed_tokens)."""
        weights = {"model.embed_tokens.weight": self.lm_head.weight, "model.norm.weight": self.norm.weight,
                   "pre_projection.weight": self.pre_projection.weight,
                   "post_projection.weight": self.post_projection.weight}  # fmt: skip
        for index, layer in enumerate(self.layers):
            prefix = f"model.layers.{index}."
            for name, tensor in layer.state_dict().items():
                module = name.rsplit(".", 1)[0]
                where = "self_attn." if module in ("q_proj", "q_norm", "o_proj") else "mlp." if "proj" in module else ""
                weights[prefix + where + name] = tensor
            weights[prefix + "layer_scalar"] = torch.ones(1)
        return {name: t.detach().to(torch.bfloat16).contiguous() for name, t in weights.items()}


def full_head_dim(verifier: dict[str, Any]) -> int:
    """A Gemma 4 full-attention layer's head_dim: its per-layer override (transformers' global_head_dim) if any."""
    full = verifier["layer_types"].index("full_attention")
    override = verifier.get("per_layer_config", {}).get(str(full), {})
    return int(override.get("head_dim", verifier.get("global_head_dim", verifier["head_dim"])))


@contextmanager
def captured(layers: dict[int, str]) -> Iterator[dict[str, tuple[torch.Tensor, torch.Tensor]]]:
    """The keys and values transformers' attention gets for the given layers (normed and rotated, as cached)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    found: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    original = ALL_ATTENTION_FUNCTIONS["sdpa"]

    def recording(module: Any, query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        if module.layer_idx in layers:
            found[layers[module.layer_idx]] = (key, value)
        return original(module, query, key, value, *args, **kwargs)

    ALL_ATTENTION_FUNCTIONS["sdpa"] = recording
    try:
        yield found
    finally:
        ALL_ATTENTION_FUNCTIONS["sdpa"] = original


def assistant_forward(assistant: Assistant, verifier: Any, batch: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(student logits, teacher logits) per step; step s at position t predicts the verifier's choice at t+1+s."""
    types = verifier.config.layer_types
    last = {max(i for i, t in enumerate(types) if t == kind): kind for kind in set(types)}
    with torch.no_grad(), captured(last) as cache:
        out = verifier.model(input_ids=batch)
        cap = verifier.config.final_logit_softcapping
        teacher = verifier.lm_head(out.last_hidden_state)
        teacher = torch.tanh(teacher / cap) * cap if cap else teacher
        embeds = F.embedding(batch, verifier.model.embed_tokens.weight)
    length = batch.shape[1] - 1 - STEPS
    trimmed = {kind: (k[:, :, :length], v[:, :, :length]) for kind, (k, v) in cache.items()}
    hidden = out.last_hidden_state[:, :length]
    pairs = []
    for step in range(STEPS):
        logits, hidden = assistant.step(embeds[:, 1 + step : 1 + step + length], hidden, trimmed)
        pairs.append((logits, teacher[:, 1 + step : 1 + step + length]))
    return pairs


def train_assistant(assistant: Assistant, verifier: Any, data: torch.Tensor, schedule: Schedule, generator: Any) -> None:
    optimizer, scheduler = _optimizer(list(assistant.parameters()), schedule)
    assistant.train()
    for batch in batches(data, schedule, generator):
        pairs = assistant_forward(assistant, verifier, batch)
        loss = sum(0.8**step * _kl(s.flatten(0, 1), t.flatten(0, 1)) for step, (s, t) in enumerate(pairs))
        _update(torch.as_tensor(loss), optimizer, scheduler)
    assistant.eval()


def assistant_agreement(assistant: Assistant, verifier: Any, data: torch.Tensor) -> list[float]:
    with torch.no_grad():
        pairs = assistant_forward(assistant, verifier, data)
    return [round((s.argmax(-1) == t.argmax(-1)).float().mean().item(), 4) for s, t in pairs]


def assistant_config(verifier: dict[str, Any], verifier_repo: str) -> dict[str, Any]:
    """config.json as Google's gemma4_assistant checkpoints write it: the assistant's text_config and its backbone."""
    text = {key: verifier[key] for key in ("vocab_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                                           "max_position_embeddings", "hidden_activation", "rope_parameters",
                                           "sliding_window", "attention_bias")}  # fmt: skip
    text.update(model_type="gemma4_text", hidden_size=WIDTH, intermediate_size=INTERMEDIATE, num_hidden_layers=2,
                layer_types=["sliding_attention", "full_attention"], num_kv_shared_layers=2, rms_norm_eps=EPS,
                final_logit_softcapping=None, hidden_size_per_layer_input=0, vocab_size_per_layer_input=0,
                global_head_dim=full_head_dim(verifier), tie_word_embeddings=True)  # fmt: skip
    return {"architectures": ["Gemma4AssistantForCausalLM"], "model_type": "gemma4_assistant",
            "backbone_hidden_size": verifier["hidden_size"], "use_ordered_embeddings": False,
            "tie_word_embeddings": True, "text_config": text, "dtype": "bfloat16",
            "base_model": verifier_repo}  # fmt: skip


def build_assistant(out: Path, verifier: Any, data: torch.Tensor, held_out: torch.Tensor, schedule: Schedule,
                    generator: Any) -> tuple[list[float], float]:  # fmt: skip
    """Train and write spechub-toy/gemma4-assistant; return its per-step agreement and seconds."""
    from safetensors.torch import save_file

    started = time.monotonic()
    config = verifier.config.to_dict()
    assistant = Assistant(config)
    train_assistant(assistant, verifier, data, schedule, generator)
    agreement = assistant_agreement(assistant, verifier, held_out)
    directory = out / ORG / "gemma4-assistant"
    directory.mkdir(parents=True, exist_ok=True)
    written = assistant_config(config, f"{ORG}/gemma4-verifier")
    (directory / "config.json").write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")
    save_file(assistant.checkpoint(), str(directory / "model.safetensors"), metadata={"format": "pt"})
    card = ("---\nlicense: apache-2.0\nlibrary_name: transformers\ntags: [spechub-toy]\n---\n\n# Toy Gemma 4 assistant "
            "(MTP drafter, gemma4_assistant)\n\nFor spechub-toy/gemma4-verifier: reads its last hidden state and KV cache; "
            "served by vLLM as method mtp.\n")  # fmt: skip
    (directory / "README.md").write_text(card)
    return agreement, round(time.monotonic() - started, 1)
