"""The verifier's exact next-token distribution, from its logits (possible on models this small)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def exact_model(
    verifier: Path | str, temperature: float, dtype: str = "float32"
) -> Iterator[Callable[[list[list[int]]], list[dict[int, float]]]]:
    """Load the verifier once; yield a function from prefixes to {token: probability} of the token after each."""
    import torch
    from transformers import AutoModelForCausalLM

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model: Any = AutoModelForCausalLM.from_pretrained(
        verifier, dtype=getattr(torch, dtype), use_safetensors=True, trust_remote_code=False
    )
    model = model.to(device)

    def distributions(prefixes: list[list[int]]) -> list[dict[int, float]]:
        found = []
        with torch.inference_mode():
            for prefix in prefixes:
                logits = model(torch.tensor([prefix], device=device)).logits[0, -1].float()
                probabilities = torch.softmax(logits / temperature, dim=-1).cpu().tolist()
                found.append({token: p for token, p in enumerate(probabilities) if p > 0})
        return found

    yield distributions


def next_token_distributions(
    verifier: Path | str, prefixes: list[list[int]], temperature: float, dtype: str = "float32"
) -> list[dict[int, float]]:
    """Return {token: probability} of the token after each prefix, at `temperature`; the model loads once."""
    with exact_model(verifier, temperature, dtype) as distributions:
        return distributions(prefixes)
