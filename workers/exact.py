"""The verifier's exact next-token distribution, from its logits (possible on models this small)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def next_token_distribution(
    verifier: Path | str, prefix: list[int], temperature: float, dtype: str = "float32"
) -> dict[int, float]:
    """Return {token: probability} of the token after `prefix`, at `temperature`."""
    import torch
    from transformers import AutoModelForCausalLM

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model: Any = AutoModelForCausalLM.from_pretrained(
        verifier, dtype=getattr(torch, dtype), use_safetensors=True, trust_remote_code=False
    )
    with torch.inference_mode():
        logits = model.to(device)(torch.tensor([prefix], device=device)).logits[0, -1].float()
    probabilities = torch.softmax(logits / temperature, dim=-1).cpu().tolist()
    return {token: p for token, p in enumerate(probabilities) if p > 0}
