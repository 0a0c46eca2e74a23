"""What the pinned vLLM build serves, written down so the web tier needs no vLLM.

tests/kernel/formats/test_vllm_support.py checks every entry against the
installed vLLM, so this table cannot drift from the engine silently.
"""

from __future__ import annotations

import re

VLLM_VERSION = "0.32.0"

# vllm.transformers_utils.configs.speculators.algos.SUPPORTED_SPECULATORS_TYPES
SPECULATORS_TYPES = frozenset({"eagle3", "peagle", "dflash", "dflash2", "dspark"})
# Types the speculators library writes that this vLLM cannot load from a speculators config.
SPECULATORS_LEGACY_TYPES = frozenset({"eagle", "mlp", "independent", "mtp"})
# The method vLLM's build_vllm_speculative_config gives each speculators type, plus extra keys.
SPECULATORS_METHOD = {
    "eagle3": ("eagle3", {}),
    "peagle": ("eagle3", {"parallel_drafting": True}),
    "dflash": ("dflash", {}),
    "dflash2": ("dflash", {}),
    "dspark": ("dspark", {}),
}
# The raw EAGLE-3 format (SpecForge, the original EAGLE-3 code): architectures vLLM's model registry maps to an
# EAGLE-3 head (vllm/model_executor/models/registry.py), served with "method": "eagle3".
EAGLE3_ARCHITECTURES = frozenset({"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Qwen3ForCausalLM"})
# vLLM's legacy EAGLE wrapper (transformers_utils/configs/eagle.py, EAGLEConfig): model_type "eagle", the head's
# own config under `model`; the wrapper's `method` (default "eagle") names the head vLLM builds, and it raises on others.
EAGLE_WRAPPER_METHODS = frozenset({"eagle", "eagle3", "dflash"})
# An EAGLE-1 head declares its base architecture X (LlamaForCausalLM); with method "eagle" vLLM wraps the config in
# EAGLEConfig and builds Eagle{X}. These are the Eagle{X} its model registry has, for X a CAUSAL_LM_ARCHITECTURES entry.
EAGLE1_ARCHITECTURES = frozenset({"EagleLlamaForCausalLM", "EagleMistralForCausalLM"})
# The tensors EagleLlamaForCausalLM.load_weights (model_executor/models/llama_eagle.py) can place: it prefixes
# "model." to every name, has no lm_head (the verifier's is shared), an fc without bias, and no input norm on
# layer 0; any other name makes the load raise.
EAGLE1_LLAMA_TENSOR = (
    r"fc\.weight|embed_tokens\.weight"
    r"|layers\.\d+\.(?:self_attn\.[qkvo]_proj|mlp\.(?:gate|up|down)_proj|post_attention_layernorm)\.weight"
    r"|layers\.(?!0\.)\d+\.input_layernorm\.weight"
)
# transformer_layer_config.model_type values vLLM maps to an EAGLE-3/PEAGLE architecture.
EAGLE3_LAYER_MODEL_TYPES = frozenset({"llama", "qwen3"})

# vllm.config.speculative.SpeculativeMethod, less the internal ones.
METHODS = frozenset({"ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3", "mtp", "dflash", "dspark"})
METHOD_CHOICES = sorted(METHODS)
DRAFTLESS_METHODS = frozenset({"ngram", "suffix"})
# Methods the config accepts but whose model this build does not register
# (vllm/model_executor/models/registry.py has MLPSpeculator commented out).
UNSERVED_METHODS = frozenset({"mlp_speculator"})

# Decoder architectures a plain draft_model (or a legacy EAGLE head) may declare.
# All of them are in vLLM's ModelRegistry, so none needs code from the repo.
CAUSAL_LM_ARCHITECTURES = frozenset(
    {
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma4ForCausalLM",
        "GptOssForCausalLM",
        "Phi3ForCausalLM",
        "GraniteForCausalLM",
        "OlmoForCausalLM",
        "GPT2LMHeadModel",
        "OPTForCausalLM",
        "EagleLlamaForCausalLM",
        "Eagle3LlamaForCausalLM",
        "MedusaModel",
    }
)

# The families SpecHub names, by the architecture a verifier's config.json declares (issue 60). Speculators ships
# drafts for the first four; the rest are families whose verifiers vLLM serves.
FAMILIES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3",
    "GptOssForCausalLM": "gpt-oss",
    "Gemma4ForCausalLM": "gemma4",
    "Gemma4ForConditionalGeneration": "gemma4",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Gemma3ForCausalLM": "gemma3",
    "Gemma2ForCausalLM": "gemma2",
    "Phi3ForCausalLM": "phi3",
    "GraniteForCausalLM": "granite",
    "OlmoForCausalLM": "olmo",
}
FAMILY_TITLES = {"llama": "Llama", "qwen3": "Qwen3", "gpt-oss": "gpt-oss", "gemma4": "Gemma 4"}
# Verifier architectures whose vLLM class implements SupportsEagle3 in this build: it hands an EAGLE-3 head the hidden
# states of the aux layers (vllm.model_executor.models.interfaces.supports_eagle3; the test checks every entry).
EAGLE3_VERIFIER_ARCHITECTURES = frozenset({
    "LlamaForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "GptOssForCausalLM", "Gemma4ForCausalLM",
    "MistralForCausalLM", "Qwen2ForCausalLM", "Phi3ForCausalLM", "GraniteForCausalLM", "OlmoForCausalLM",
    "Gemma4ForConditionalGeneration",
})  # fmt: skip
# Verifier architectures vLLM registers whose class the CPU workers' install cannot import, in its own words.
# Gemma 4 as Google publishes it (multimodal) imports transformers' Gemma4Processor, which needs torchvision; the CPU
# install removes torchvision (PyPI's is a CUDA build that breaks torch+cpu; scripts/bootstrap.sh).
UNLOADABLE_ON_CPU: dict[str, str] = {
    "Gemma4ForConditionalGeneration": "ModuleNotFoundError: Could not import module 'Gemma4Processor' (No module named "
    "'torchvision')",
}
# Gemma 4's MTP assistant drafter: the model types vLLM's SpeculativeConfig renames to "gemma4_mtp" and serves with
# "method": "mtp" (its own name for "gemma4_mtp", which it calls deprecated; vllm/config/speculative.py), and the
# verifier architectures whose KV cache the assistant reads.
GEMMA4_ASSISTANT_TYPES = frozenset({"gemma4_assistant", "gemma4_unified_assistant"})
GEMMA4_ASSISTANT_VERIFIERS = frozenset({"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"})

# vLLM has no upper bound; beyond this acceptance at the tail is ~0 and the cost only grows.
MAX_SPECULATIVE_TOKENS = 16

# Dynamic SD's batch-size schedule (`num_speculative_tokens_per_batch_size`): vLLM 0.24 on takes a list of inclusive
# [start, end, k] ranges (vllm/config/speculative.py); the pull request that added it (vllm#32374) took a dict of
# "start-end" keys to k, the form a build before 0.24 needs.
DYNAMIC_K_RANGES_SINCE = (0, 24)


def dynamic_k_takes_ranges(build: str) -> bool:
    """Whether vLLM `build` ("0.32.0", "0.23.1+cpu") takes the schedule as ranges; an unreadable build is the pinned one."""
    release = re.match(r"(\d+)\.(\d+)", build) or re.match(r"(\d+)\.(\d+)", VLLM_VERSION)
    assert release is not None  # VLLM_VERSION is a release
    return (int(release[1]), int(release[2])) >= DYNAMIC_K_RANGES_SINCE
