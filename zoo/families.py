"""The zoo's other families (issue 60): a Qwen3, a gpt-oss and a Gemma 4 toy verifier, each with an EAGLE-3 head.

Each family's verifier is its real transformers class with the family's own config fields: Qwen3's QK-norm and
grouped KV heads; gpt-oss's router over experts, attention sinks, alternating sliding and full attention and YaRN
rope; Gemma 4's sliding and full layers with their own rope, and final logit soft-capping. They are smaller than the
Llama toy (hidden 128, not 256), so that three of them keep the zoo in git under 60 MB.

Each tokenizer is the zoo's (the same corpus, seed and vocab give the same BPE) extended with the family's chat tokens,
and its chat template follows the family's published one: Qwen3's `enable_thinking` switch, gpt-oss's harmony format
with `reasoning_effort`, Gemma's turns. A third of the training documents are chats rendered the family's way, with a
thought (Qwen3: sometimes empty, as `enable_thinking=False` writes it; gpt-oss: an analysis whose length follows the
effort) before the answer, so that each switch changes what the model writes, and so its acceptance.

`python -m zoo.families` trains them into zoo/models and records them in BUILD.json beside the Llama zoo.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Tokenizer
from transformers import (
    AutoModelForCausalLM,
    GenerationConfig,
    GptOssConfig,
    LlamaConfig,
    PretrainedConfig,
    PreTrainedModel,
    Qwen3Config,
)
from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig

from zoo import ORG, corpus
from zoo.build import SpeculatorsConfig, bf16, encode, hf_config, speculators_config, write_model
from zoo.eagle3 import Eagle3Head
from zoo.tokenizer import save_tokenizer, special_ids, train_tokenizer
from zoo.train import Schedule, head_agreement, train_head, train_verifier

BASE_VOCAB, VOCAB, HIDDEN, LAYERS, HEADS, HEAD_DIM, INTERMEDIATE = 2048, 2112, 128, 4, 2, 64, 384
AUX_LAYER_IDS = [1, 2, 3]
SLIDING_WINDOW = 64  # shorter than a prompt and its answer, so the toys use their sliding layers
STEPS = {"verifier": 900, "head": 500, "assistant": 500}
DOCUMENTS = 20000
EFFORTS = ("low", "medium", "high")


@dataclass(frozen=True)
class Family:
    """One family's toy: its class, config, chat tokens and template, and how a chat reads in its format."""

    name: str
    title: str
    architecture: str
    chat_tokens: tuple[str, ...]
    chat_template: str
    config: Callable[[dict[str, int]], PretrainedConfig]
    chat: Callable[[random.Random, str, str], str]
    turn_end: str

    @property
    def verifier(self) -> str:
        return f"{self.name}-verifier"

    @property
    def head(self) -> str:
        return f"{self.name}-eagle3-head"


QWEN3_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)
GPT_OSS_TEMPLATE = (
    "{%- if reasoning_effort is not defined %}{%- set reasoning_effort = 'medium' %}{%- endif %}"
    "{{- '<|start|>system<|message|>You are a toy model.\\nReasoning: ' + reasoning_effort + '\\n\\n"
    "# Valid channels: analysis, final. Channel must be included for every message.<|end|>' }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|start|>assistant<|channel|>final<|message|>' + message['content'] + '<|end|>' }}"
    "{%- else %}{{- '<|start|>' + message['role'] + '<|message|>' + message['content'] + '<|end|>' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}"
)
GEMMA4_TEMPLATE = (
    "{{ bos_token }}{%- for message in messages %}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{%- endif %}"
)


def _qwen3_config(ids: dict[str, int]) -> PretrainedConfig:
    return Qwen3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=1, head_dim=HEAD_DIM, max_position_embeddings=1024,
        rms_norm_eps=1e-6, tie_word_embeddings=False, use_sliding_window=False, sliding_window=None,
        max_window_layers=LAYERS, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["pad"], architectures=["Qwen3ForCausalLM"],
    )  # fmt: skip


def _gpt_oss_config(ids: dict[str, int]) -> PretrainedConfig:
    yarn = {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
            "original_max_position_embeddings": 4096, "truncate": False}  # fmt: skip
    return GptOssConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=HIDDEN * 2, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=1, head_dim=HEAD_DIM, num_local_experts=4,
        num_experts_per_tok=2, sliding_window=SLIDING_WINDOW, max_position_embeddings=131072, rope_parameters=yarn,
        layer_types=["sliding_attention", "full_attention"] * (LAYERS // 2), tie_word_embeddings=False,
        bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["pad"], architectures=["GptOssForCausalLM"],
    )  # fmt: skip


def _gemma4_config(ids: dict[str, int]) -> PretrainedConfig:
    rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}}  # fmt: skip
    return Gemma4TextConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=1, head_dim=HEAD_DIM, max_position_embeddings=1024,
        sliding_window=SLIDING_WINDOW, layer_types=["sliding_attention"] * (LAYERS - 1) + ["full_attention"],
        final_logit_softcapping=30.0, rope_parameters=rope, hidden_size_per_layer_input=0,
        vocab_size_per_layer_input=VOCAB, num_kv_shared_layers=0, tie_word_embeddings=True,
        bos_token_id=ids["bos"], eos_token_id=ids["eos"], pad_token_id=ids["pad"], architectures=["Gemma4ForCausalLM"],
    )  # fmt: skip


def _qwen3_chat(rng: random.Random, user: str, reply: str) -> str:
    thought = "" if rng.random() < 0.5 else f"\nThe user wrote: {user.splitlines()[0][:60]}\n"
    return f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n<think>\n{thought}\n</think>\n\n{reply}<|im_end|>\n"


def _analysis(effort: str, user: str) -> str:
    first = user.splitlines()[0][:60]
    return {
        "low": "Answer.",
        "medium": f"The user asks: {first}. Answer it.",
        "high": f"The user asks: {first}. Read it again: {first}. Check the answer, then answer it.",
    }[effort]


def _gpt_oss_chat(rng: random.Random, user: str, reply: str) -> str:
    effort = rng.choice(EFFORTS)
    channels = "# Valid channels: analysis, final. Channel must be included for every message."
    system = f"You are a toy model.\nReasoning: {effort}\n\n{channels}"
    return (
        f"<|start|>system<|message|>{system}<|end|><|start|>user<|message|>{user}<|end|>"
        f"<|start|>assistant<|channel|>analysis<|message|>{_analysis(effort, user)}<|end|>"
        f"<|start|>assistant<|channel|>final<|message|>{reply}<|return|>"
    )


def _gemma4_chat(rng: random.Random, user: str, reply: str) -> str:
    return f"<start_of_turn>user\n{user.strip()}<end_of_turn>\n<start_of_turn>model\n{reply.strip()}<end_of_turn>\n"


FAMILIES = (
    Family("qwen3", "Qwen3", "Qwen3ForCausalLM", ("<|im_start|>", "<|im_end|>", "<think>", "</think>"),
           QWEN3_TEMPLATE, _qwen3_config, _qwen3_chat, "<|im_end|>"),
    Family("gpt-oss", "gpt-oss", "GptOssForCausalLM",
           ("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>"),
           GPT_OSS_TEMPLATE, _gpt_oss_config, _gpt_oss_chat, "<|return|>"),
    Family("gemma4", "Gemma 4", "Gemma4ForCausalLM", ("<start_of_turn>", "<end_of_turn>"),
           GEMMA4_TEMPLATE, _gemma4_config, _gemma4_chat, "<end_of_turn>"),
)  # fmt: skip
BY_NAME = {family.name: family for family in FAMILIES}


def split_chat(document: str) -> tuple[str, str]:
    """Return (user, reply): a corpus document's first line asks, the rest answers."""
    first, _, rest = document.strip("\n").partition("\n")
    return first, rest or first


def family_documents(family: Family, seed: int, count: int) -> list[str]:
    """The corpus with every third document a chat in the family's format."""
    rng = random.Random(seed)  # noqa: S311 - a seeded corpus, not security
    documents = corpus.documents(seed, count)
    return [family.chat(rng, *split_chat(doc)) if i % 3 == 2 else doc for i, doc in enumerate(documents)]


def family_tokenizer(family: Family, plain: list[str]) -> Tokenizer:
    """The zoo's BPE over the plain corpus, with the family's chat tokens appended as special tokens."""
    tokenizer = train_tokenizer(plain, BASE_VOCAB)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in family.chat_tokens])
    return tokenizer


def head_layer_config(max_positions: int = 1024) -> LlamaConfig:
    """The EAGLE-3 head's one decoder layer: a Llama layer, as the published heads of every family have, with its
    verifier's context (default rope: the context changes no weight)."""
    return LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, num_hidden_layers=1,
        num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=max_positions, rms_norm_eps=1e-5,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )  # fmt: skip


def head_config(family: Family) -> SpeculatorsConfig:
    """A speculators-format config for the family's head, naming its verifier as the published heads do."""
    layer = head_layer_config(family.config({"bos": 1, "eos": 2, "pad": 0}).max_position_embeddings)
    return speculators_config(layer, VOCAB, f"{ORG}/{family.verifier}", family.architecture, HIDDEN)


class FamilyBuilder:
    """Train one family's verifier and head into `out`; report seconds and the head's per-step agreement."""

    def __init__(self, family: Family, out: Path, seed: int, scale: float) -> None:
        self.family, self.out, self.seed, self.scale = family, out, seed, scale
        self.generator = torch.Generator().manual_seed(seed)
        self.seconds: dict[str, float] = {}

    def steps(self, name: str) -> Schedule:
        return Schedule(steps=max(2, round(STEPS[name] * self.scale)))

    def build(self) -> list[float]:
        torch.manual_seed(self.seed)
        count = max(700, round(DOCUMENTS * self.scale))
        plain = corpus.documents(self.seed, count)
        tokenizer = family_tokenizer(self.family, plain)
        ids = special_ids(tokenizer)
        data = encode(tokenizer, family_documents(self.family, self.seed, count), ids)
        held_out = encode(tokenizer, family_documents(self.family, self.seed + 1, 700), ids)[:64]
        verifier = self.verifier(tokenizer, ids, data)
        return self.head(verifier, data, held_out)

    def verifier(self, tokenizer: Tokenizer, ids: dict[str, int], data: torch.Tensor) -> PreTrainedModel:
        started = time.monotonic()
        config = self.family.config(ids)
        model = AutoModelForCausalLM.from_config(config)
        train_verifier(model, data, self.steps("verifier"), self.generator)
        directory = self.out / ORG / self.family.verifier
        body = (
            f"{self.family.architecture}, {LAYERS} layers, hidden {HIDDEN}, vocab {VOCAB}, trained on SpecHub's "
            f"synthetic corpus with chats in {self.family.title}'s format."
        )
        write_model(directory, hf_config(config), bf16(model.state_dict()), f"# Toy {self.family.title} verifier\n\n{body}")
        save_tokenizer(tokenizer, directory, self.family.chat_template, self.family.chat_tokens)
        turn_end = tokenizer.token_to_id(self.family.turn_end)
        generation = GenerationConfig(bos_token_id=ids["bos"], eos_token_id=[ids["eos"], turn_end], do_sample=False)
        (directory / "generation_config.json").write_text(generation.to_json_string(use_diff=True))
        self.seconds[self.family.verifier] = round(time.monotonic() - started, 1)
        return model

    def head(self, verifier: PreTrainedModel, data: torch.Tensor, held_out: torch.Tensor) -> list[float]:
        started = time.monotonic()
        head = Eagle3Head(head_layer_config(), len(AUX_LAYER_IDS))
        train_head(head, verifier, data, self.steps("head"), self.generator, aux_layer_ids=AUX_LAYER_IDS)
        agreement = head_agreement(head, verifier, held_out, AUX_LAYER_IDS, None)
        weights = bf16({name.replace("midlayer.", "layers.0."): t for name, t in head.native_state_dict().items()})
        body = f"For {ORG}/{self.family.verifier}; shares its embeddings and lm_head."
        title = f"Toy EAGLE-3 head for the {self.family.title} verifier (speculators format)"
        write_model(self.out / ORG / self.family.head, head_config(self.family), weights, f"# {title}\n\n{body}")
        self.seconds[self.family.head] = round(time.monotonic() - started, 1)
        return agreement


def build_assistant_for(out: Path, seed: int, scale: float, auto: Any) -> dict[str, Any]:
    """Train Gemma 4's MTP assistant on the Gemma 4 verifier as written (bf16, read back), on the family's corpus."""
    from zoo.assistant import build_assistant

    family = BY_NAME["gemma4"]
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed + 1)
    verifier = auto.from_pretrained(out / ORG / family.verifier, dtype=torch.float32).eval()
    count = max(700, round(DOCUMENTS * scale))
    tokenizer = family_tokenizer(family, corpus.documents(seed, count))
    ids = special_ids(tokenizer)
    data = encode(tokenizer, family_documents(family, seed, count), ids)
    held_out = encode(tokenizer, family_documents(family, seed + 1, 700), ids)[:64]
    schedule = Schedule(steps=max(2, round(STEPS["assistant"] * scale)))
    agreement, seconds = build_assistant(out, verifier, data, held_out, schedule, generator)
    return {"agreement": agreement, "seconds": seconds}


def build_families(out: Path, seed: int, scale: float, names: list[str]) -> dict[str, Any]:
    """Build the named families; return their seconds and agreement, as BUILD.json records them."""
    seconds: dict[str, float] = {}
    agreement: dict[str, list[float]] = {}
    for name in names:
        builder = FamilyBuilder(BY_NAME[name], out, seed, scale)
        agreement[BY_NAME[name].head] = builder.build()
        seconds.update(builder.seconds)
        print(json.dumps({"family": name, "seconds": builder.seconds, "agreement": agreement[BY_NAME[name].head]}))
        if name == "gemma4":  # its MTP assistant reads the verifier as written
            assistant = build_assistant_for(out, seed, scale, AutoModelForCausalLM)
            agreement["gemma4-assistant"], seconds["gemma4-assistant"] = assistant["agreement"], assistant["seconds"]
    repos = [repo for name in names for repo in (BY_NAME[name].verifier, BY_NAME[name].head)]
    return {"seconds": seconds, "agreement": agreement, "repos": repos + ["gemma4-assistant"] * ("gemma4" in names)}


def main() -> None:
    from zoo.variants import file_digests

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "models")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--family", action="append", choices=sorted(BY_NAME), help="default: every family")
    parser.add_argument("--assistant-only", action="store_true", help="retrain Gemma 4's assistant on the written verifier")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    if args.assistant_only:
        assistant = build_assistant_for(args.out, args.seed, args.scale, AutoModelForCausalLM)
        name = "gemma4-assistant"
        report = {"seconds": {name: assistant["seconds"]}, "agreement": {name: assistant["agreement"]}, "repos": [name]}
    else:
        report = build_families(args.out, args.seed, args.scale, args.family or [f.name for f in FAMILIES])
    record_file = args.out / "BUILD.json"
    record = json.loads(record_file.read_text()) if record_file.is_file() else {"seconds": {}, "agreement": {}}
    record["seconds"].update(report["seconds"])
    record["agreement"].update(report["agreement"])
    ours = tuple(f"{ORG}/{repo}/" for repo in report["repos"])
    files = {path: digest for path, digest in record.get("files", {}).items() if not path.startswith(ours)}
    record["files"] = dict(sorted({**files, **{p: d for p, d in file_digests(args.out).items() if p.startswith(ours)}}.items()))
    record_file.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
