"""An EAGLE-3 draft head in plain PyTorch, laid out as vLLM's Eagle3LlamaForCausalLM.

Weights are named as vLLM's native EAGLE-3 checkpoints (`fc`, `midlayer.*`,
`norm`, optional `lm_head`); the speculators format renames `midlayer.` to
`layers.0.`. The verifier's embeddings (and lm_head, at full vocab) are shared.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb


class Eagle3Attention(nn.Module):
    """Attention over [embeds; hidden] (2·hidden in) with EAGLE-3's training-time-test cache."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.heads = config.num_attention_heads
        self.head_dim = config.hidden_size // self.heads
        width = 2 * config.hidden_size
        self.q_proj = nn.Linear(width, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(width, self.heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(width, self.heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=False)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, self.head_dim).transpose(1, 2)

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], cache: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """Step i of training-time test: causal over step 0's keys, diagonal over steps 1..i."""
        q, k, v = self._split(self.q_proj(x)), self._split(self.k_proj(x)), self._split(self.v_proj(x))
        q, k = apply_rotary_pos_emb(q, k, *rope)
        cache.append((k, v))
        k0, v0 = cache[0]
        length = x.shape[1]
        scores = q @ k0.transpose(-1, -2) / self.head_dim**0.5
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        diagonal = [(q * ki).sum(-1, keepdim=True) / self.head_dim**0.5 for ki, _ in cache[1:]]
        weights = torch.cat([scores, *diagonal], dim=-1).softmax(dim=-1)
        out = weights[..., :length] @ v0
        for index, (_, vi) in enumerate(cache[1:]):
            out = out + weights[..., length + index : length + index + 1] * vi
        batch = x.shape[0]
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class Eagle3MLP(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Eagle3Layer(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.hidden_norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.self_attn = Eagle3Attention(config)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = Eagle3MLP(config)


class Eagle3Head(nn.Module):
    """fc(aux states) → one decoder layer over [embed; hidden] → norm → logits.

    Matches vLLM with norm_before_residual=False: the residual is the hidden
    state before hidden_norm, and the next step's hidden is the pre-norm output.
    """

    def __init__(self, config: LlamaConfig, aux_layers: int, draft_vocab_size: int | None = None) -> None:
        super().__init__()
        self.fc = nn.Linear(aux_layers * config.hidden_size, config.hidden_size, bias=False)
        self.midlayer = Eagle3Layer(config)
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, draft_vocab_size, bias=False) if draft_vocab_size else None
        self.rotary = LlamaRotaryEmbedding(config)

    def step(
        self,
        embeds: torch.Tensor,
        hidden: torch.Tensor,
        positions: torch.Tensor,
        cache: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (normed output, pre-norm output) for one training-time-test step."""
        layer = self.midlayer
        residual = hidden
        x = torch.cat([layer.input_layernorm(embeds), layer.hidden_norm(hidden)], dim=-1)
        rope = self.rotary(x, positions)
        residual = residual + layer.self_attn(x, rope, cache)
        prenorm = residual + layer.mlp(layer.post_attention_layernorm(residual))
        return self.norm(prenorm), prenorm

    def native_state_dict(self) -> dict[str, torch.Tensor]:
        """Return the weights under vLLM's native EAGLE-3 names."""
        return {name: tensor for name, tensor in self.state_dict().items() if not name.startswith("rotary.")}
