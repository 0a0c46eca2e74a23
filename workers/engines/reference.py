"""The reference engine: speculative decoding written plainly in PyTorch on transformers models.

It is the independent oracle for vLLM, not a speed contender: no KV cache, one
sequence at a time. It implements the verifier alone and the draft_model
method, with greedy verification and the standard rejection-sampling rule
(accept d with probability min(1, p(d)/q(d)), else sample from norm(max(0, p - q))),
which keeps the output distribution exactly the verifier's.
"""

from __future__ import annotations

import os
import platform
from typing import Any

from kernel.errors import UserError
from workers import audit
from workers.engines.base import Completion, Engine, EngineConfig, Sampling, SpecCounters

# A deliberately wrong acceptance rule, for showing that the sampling test catches a biased sampler.
ACCEPT_RULES = ("rejection", "always")


class ReferenceEngine(Engine):
    name = "reference"

    def __init__(self) -> None:
        self.verifier: Any = None
        self.draft: Any = None
        self.k = 0
        self.accept_rule = "rejection"
        self.total = SpecCounters()
        self.config: EngineConfig | None = None

    def start(self, config: EngineConfig) -> None:
        import torch

        started = audit.started("reference", "transformers " + ("draft_model" if config.speculative_config else "verifier-alone"))
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = getattr(torch, config.dtype)
        self.config = config
        self.verifier = self._load(config.verifier)
        self.eos = _eos_ids(self.verifier)
        spec = config.speculative_config
        if spec is not None:
            if spec.get("method") != "draft_model":
                raise UserError(
                    "engine:refused-pair", f"The reference engine implements draft_model, not {spec.get('method')!r}."
                )
            draft, k = spec.get("model"), spec.get("num_speculative_tokens")
            if not isinstance(draft, str) or not isinstance(k, int):
                raise UserError("engine:refused-pair", "A draft_model config needs a `model` folder and an integer k.")
            self.draft, self.k = self._load(draft), k
        self.accept_rule = str(config.extra.get("accept_rule", "rejection"))
        if spec is not None and spec.get("rejection_sample_method", "standard") != "standard":
            self.accept_rule = _lossy_rule(spec, self.k)
        if self.accept_rule not in ACCEPT_RULES:
            raise ValueError(f"accept_rule must be one of {ACCEPT_RULES}")
        self.total = SpecCounters(per_position=(0,) * self.k)
        started.answered()

    def _load(self, path: str) -> Any:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype, use_safetensors=True, trust_remote_code=False)
        return model.to(self.device).eval()

    def generate(self, prompts: list[list[int]], sampling: Sampling) -> list[Completion]:
        import torch

        generator = torch.Generator(device=self.device).manual_seed(sampling.seed if sampling.seed is not None else 0)
        with torch.inference_mode():
            return [self._request(list(prompt), sampling, generator) for prompt in prompts for _ in range(sampling.n)]

    def _request(self, ids: list[int], sampling: Sampling, generator: Any) -> Completion:
        before = self.total
        token_ids = tuple(self._decode(ids, sampling, generator))
        return Completion(token_ids=token_ids, counters=self.total - before if self.draft else None)

    def _decode(self, ids: list[int], sampling: Sampling, generator: Any) -> list[int]:
        out: list[int] = []
        while len(out) < sampling.max_tokens and not (out and out[-1] in self.eos):
            budget = sampling.max_tokens - len(out)
            step = (
                self._speculate(ids + out, sampling, generator, budget)
                if self.draft
                else [self._next(ids + out, sampling, generator)]
            )
            for token in step[:budget]:
                out.append(token)
                if token in self.eos:
                    break
        return out

    def _logits(self, model: Any, ids: list[int]) -> Any:
        import torch

        return model(torch.tensor([ids], device=self.device)).logits[0].float()

    def _next(self, ids: list[int], sampling: Sampling, generator: Any) -> int:
        return _choose(self._logits(self.verifier, ids)[-1], sampling, generator)[0]

    def _speculate(self, ids: list[int], sampling: Sampling, generator: Any, budget: int) -> list[int]:
        """One draft-then-verify step; returns the accepted tokens plus one from the verifier."""
        proposed: list[int] = []
        draft_probs: list[Any] = []
        for _ in range(self.k):
            token, probs = _choose(self._logits(self.draft, ids + proposed)[-1], sampling, generator)
            proposed.append(token)
            draft_probs.append(probs)
        target = self._logits(self.verifier, ids + proposed)[-(self.k + 1) :]
        accepted: list[int] = []
        for position, token in enumerate(proposed):
            verdict = self._verify(token, target[position], draft_probs[position], sampling, generator)
            if verdict is not None:  # rejected: the verifier's replacement ends the step
                self._count(len(accepted))
                return [*accepted, verdict]
            accepted.append(token)
        self._count(len(accepted))
        return [*accepted, _choose(target[self.k], sampling, generator)[0]]

    def _verify(self, token: int, logits: Any, draft_probs: Any, sampling: Sampling, generator: Any) -> int | None:
        """Return None to accept `token`, else the token the verifier emits instead."""
        import torch

        if sampling.temperature == 0:
            best = int(torch.argmax(logits))
            return None if best == token else best
        probs = torch.softmax(logits / sampling.temperature, dim=-1)
        ratio = float(probs[token] / draft_probs[token])
        if self.accept_rule == "always" or float(torch.rand((), generator=generator, device=self.device)) < min(1.0, ratio):
            return None
        residual = torch.clamp(probs - draft_probs, min=0)
        return int(torch.multinomial(residual / residual.sum(), 1, generator=generator))

    def _count(self, accepted: int) -> None:
        positions = tuple(1 if i < accepted else 0 for i in range(self.k))
        self.total = self.total + SpecCounters(drafts=1, draft_tokens=self.k, accepted=accepted, per_position=positions)

    def counters(self) -> SpecCounters:
        return self.total

    def manifest(self) -> dict[str, object]:
        import torch
        import transformers

        on_gpu = self.device.type == "cuda"
        return {
            "engine": self.name,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": self.device.type,
            "device_name": torch.cuda.get_device_name(0) if on_gpu else platform.processor() or platform.machine(),
            "device_count": torch.cuda.device_count() if on_gpu else os.cpu_count(),
            "cuda": torch.version.cuda,
            "arguments": {"k": self.k, "accept_rule": self.accept_rule, "dtype": str(self.dtype)},
        }

    def stop(self) -> None:
        self.verifier = self.draft = None


def _choose(logits: Any, sampling: Sampling, generator: Any) -> tuple[int, Any]:
    """Return (token, the distribution it was drawn from); greedy takes the argmax."""
    import torch

    if sampling.temperature == 0:
        return int(torch.argmax(logits)), None
    probs = torch.softmax(logits / sampling.temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator)), probs


def _eos_ids(model: Any) -> set[int]:
    """The tokens that end a request: the config's eos and generation_config.json's, as vLLM stops on both (a chat
    model's turn end, Qwen3's `<|im_end|>`, is often only in the latter)."""
    found: set[int] = set()
    for eos in (model.config.eos_token_id, getattr(model.generation_config, "eos_token_id", None)):
        found |= set(eos) if isinstance(eos, list) else {eos} if isinstance(eos, int) else set()
    return found


def _lossy_rule(spec: dict[str, object], k: int) -> str:
    """vLLM's synthetic acceptance at AL k + 1 keeps every drafted token, which is the "always" rule; other rejection
    methods, and other synthetic rates, are not modelled here."""
    if spec.get("rejection_sample_method") == "synthetic" and spec.get("synthetic_acceptance_length") == k + 1:
        return "always"
    method, length = spec.get("rejection_sample_method"), spec.get("synthetic_acceptance_length")
    raise UserError(
        "engine:refused-pair",
        "The reference engine implements the standard rejection sampler, and synthetic acceptance only at AL k + 1 "
        f"(every drafted token kept), not {method!r} with acceptance length {length}.",
    )
