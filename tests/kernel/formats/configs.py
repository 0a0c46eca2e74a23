"""Hand-written configs modelled on public speculator and verifier repos."""

from __future__ import annotations

import copy
from typing import Any

from kernel.formats import GateInput, RepoMetadata, TensorData

LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
}
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}
GEMMA3_4B = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {"model_type": "gemma3_text", "hidden_size": 2560, "num_hidden_layers": 34, "vocab_size": 262208},
}

# The public EAGLE-3 head for Llama 3.1 8B, as the speculators library writes it.
EAGLE3_LLAMA = {
    "architectures": ["Eagle3Speculator"],
    "auto_map": {"": "eagle3.Eagle3SpeculatorConfig"},
    "draft_vocab_size": 32000,
    "norm_before_residual": False,
    "target_hidden_size": None,
    "speculators_config": {
        "algorithm": "eagle3",
        "default_proposal_method": "greedy",
        "proposal_methods": [
            {"proposal_type": "greedy", "speculative_tokens": 5, "verifier_accept_k": 1, "accept_tolerance": 0.0}
        ],
        "verifier": {"name_or_path": "meta-llama/Llama-3.1-8B-Instruct", "architectures": ["LlamaForCausalLM"]},
    },
    "speculators_model_type": "eagle3",
    "speculators_version": "0.1.0.dev14",
    "transformer_layer_config": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 1,
        "vocab_size": 128256,
        "max_position_embeddings": 2048,
    },
}


def edited(document: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """Return a deep copy with dotted-path keys set (None deletes)."""
    result = copy.deepcopy(document)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = result
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return result


def repo(config: Any, repo_id: str = "org/draft", files: tuple[str, ...] = ("config.json", "model.safetensors")) -> RepoMetadata:
    return RepoMetadata(repo_id=repo_id, sha="a" * 40, files=list(files), config=config, tokenizer=None, tokenizer_config=None)


def mapping(draft_vocab: int, target_vocab: int) -> dict[str, TensorData]:
    """A valid t2d/d2t pair: the draft keeps the first draft_vocab verifier tokens."""
    t2d = tuple(1 if i < draft_vocab else 0 for i in range(target_vocab))
    return {
        "t2d": TensorData(dtype="BOOL", shape=(target_vocab,), values=t2d),
        "d2t": TensorData(dtype="I64", shape=(draft_vocab,), values=(0,) * draft_vocab),
    }


def gate_input(
    draft: Any,
    verifier: dict[str, Any] = LLAMA_31_8B,
    *,
    verifier_id: str = "meta-llama/Llama-3.1-8B-Instruct",
    tensors: dict[str, TensorData] | None = None,
    draftless: bool = False,
    **kwargs: Any,
) -> GateInput:
    return GateInput(
        verifier=repo(verifier, verifier_id),
        verifier_id=verifier_id,
        draft=None if draftless else repo(draft),
        tensors=tensors or {},
        **kwargs,
    )
