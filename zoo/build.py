"""Build the toy zoo: `python -m zoo.build [--out zoo/models] [--seed 0] [--scale 1.0]`; then `python -m zoo.families`
builds the other families into the same folder (`make zoo` runs both).

Seeded and reproducible on one machine: the same seed, scale and thread count
give the same tokenizer and the same weights. `--scale` shrinks the corpus and
step counts proportionally (the tests build at a small scale twice).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from zoo import ORG, broken, corpus, formats
from zoo.eagle3 import Eagle3Head
from zoo.tokenizer import save_tokenizer, special_ids, train_tokenizer
from zoo.train import Schedule, distill_draft, draft_agreement, head_agreement, train_head, train_verifier
from zoo.variants import file_digests

VERIFIER, DRAFT, HEAD, HEAD_REDUCED = "llama-verifier", "llama-draft-1l", "eagle3-head", "eagle3-head-reduced"
VOCAB, HIDDEN, LAYERS, HEADS, INTERMEDIATE, SEQ = 2048, 256, 4, 4, 688, 128
AUX_LAYER_IDS = [1, 2, 3]  # inputs of layers 1, L/2 and L-1 (vLLM's convention) for L = 4
DRAFT_VOCAB = 1024
STEPS = {"verifier": 900, "draft": 500, "head": 500, "head_reduced": 300}
DOCUMENTS = 20000
LICENSE_CARD = "---\nlicense: apache-2.0\nlibrary_name: transformers\ntags: [spechub-toy]\n---\n\n"


class ProposalMethod(TypedDict):
    proposal_type: str
    speculative_tokens: int
    verifier_accept_k: int
    accept_tolerance: float


class VerifierReference(TypedDict):
    name_or_path: str
    architectures: list[str]


class SpeculatorsSection(TypedDict):
    algorithm: str
    proposal_methods: list[ProposalMethod]
    default_proposal_method: str
    verifier: VerifierReference


class SpeculatorsConfig(TypedDict):
    """The config.json the zoo writes for an EAGLE-3 head in the speculators format."""

    architectures: list[str]
    speculators_model_type: str
    speculators_version: str
    speculators_config: SpeculatorsSection
    transformer_layer_config: dict[str, Any]  # a transformers config: its keys vary per model and version
    draft_vocab_size: int
    target_hidden_size: int
    norm_before_residual: bool
    eagle_aux_hidden_state_layer_ids: list[int]
    dtype: str


class BuildReport(TypedDict):
    """What a build measured: seconds per stage, and each draft's agreement with the verifier (one rate, or per step)."""

    seed: int
    scale: float
    seconds: dict[str, float]
    agreement: dict[str, float | list[float]]


class BuildRecord(BuildReport):
    """BUILD.json: the report, how it was built, and the sha256 of every file it wrote."""

    threads: int
    torch: str
    files: dict[str, str]


def llama_config(ids: dict[str, int], layers: int, vocab: int = VOCAB, hidden: int = HIDDEN) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=INTERMEDIATE if hidden == HIDDEN else hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        max_position_embeddings=1024,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=ids["bos"],
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
        architectures=["LlamaForCausalLM"],
    )


def encode(tokenizer: Tokenizer, documents: list[str], ids: dict[str, int]) -> torch.Tensor:
    """Return the documents, each wrapped in bos/eos, concatenated and cut into SEQ-token rows."""
    stream: list[int] = []
    for encoding in tokenizer.encode_batch(documents):
        stream += [ids["bos"], *encoding.ids, ids["eos"]]
    rows = len(stream) // SEQ
    return torch.tensor(stream[: rows * SEQ]).view(rows, SEQ)


def bf16(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().to(torch.bfloat16).contiguous() for name, tensor in state.items()}


def write_model(directory: Path, config: Mapping[str, object], weights: dict[str, torch.Tensor], card: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(weights, str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "README.md").write_text(LICENSE_CARD + card + "\n")


def hf_config(config: LlamaConfig) -> dict[str, Any]:
    """Return the transformers config as config.json holds it; its keys are transformers', and vary with the model."""
    data = config.to_dict()
    data.pop("transformers_version", None)
    data["dtype"] = "bfloat16"
    return data


def write_llama(directory: Path, model: LlamaForCausalLM, tokenizer: Tokenizer, card: str) -> None:
    write_model(directory, hf_config(model.config), bf16(model.state_dict()), card)
    save_tokenizer(tokenizer, directory)
    generation = GenerationConfig(bos_token_id=model.config.bos_token_id, eos_token_id=model.config.eos_token_id, do_sample=False)
    (directory / "generation_config.json").write_text(generation.to_json_string(use_diff=True))


def speculators_config(
    head_config: LlamaConfig,
    draft_vocab: int,
    verifier_path: str = f"{ORG}/{VERIFIER}",
    verifier_architecture: str = "LlamaForCausalLM",
    target_hidden: int = HIDDEN,
) -> SpeculatorsConfig:
    """Return a speculators-format config.json for an EAGLE-3 head on a toy verifier (the Llama one by default)."""
    layer = hf_config(head_config)
    layer.pop("architectures", None)
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.3.0",
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [
                {"proposal_type": "greedy", "speculative_tokens": 4, "verifier_accept_k": 1, "accept_tolerance": 0.0}
            ],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": verifier_path, "architectures": [verifier_architecture]},
        },
        "transformer_layer_config": layer,
        "draft_vocab_size": draft_vocab,
        "target_hidden_size": target_hidden,
        "norm_before_residual": False,
        "eagle_aux_hidden_state_layer_ids": AUX_LAYER_IDS,
        "dtype": "bfloat16",
    }


def speculators_weights(head: Eagle3Head, mapping: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """Return the head's weights under speculators names (`layers.0.` for `midlayer.`)."""
    weights = bf16({name.replace("midlayer.", "layers.0."): t for name, t in head.native_state_dict().items()})
    return {**weights, **(mapping or {})}


def vocab_mapping(data: torch.Tensor, vocab: int, draft_vocab: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Return the draft vocab (the most frequent verifier ids, sorted) and its t2d/d2t tensors."""
    counts = torch.bincount(data.flatten(), minlength=vocab)
    counts[:5] += data.numel()  # special tokens always stay in the draft vocab
    draft_ids = counts.topk(draft_vocab).indices.sort().values
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[draft_ids] = True
    d2t = draft_ids - torch.arange(draft_vocab)
    return draft_ids, {"t2d": t2d, "d2t": d2t.to(torch.int64)}


class Builder:
    """Build every zoo repo under `out`, recording timings and agreement figures."""

    def __init__(self, out: Path, seed: int, scale: float) -> None:
        self.out, self.seed, self.scale = out, seed, scale
        self.report: BuildReport = {"seed": seed, "scale": scale, "seconds": {}, "agreement": {}}
        self.generator = torch.Generator().manual_seed(seed)

    def steps(self, name: str) -> Schedule:
        return Schedule(steps=max(2, round(STEPS[name] * self.scale)))

    def repo(self, name: str) -> Path:
        return self.out / ORG / name

    def timed(self, name: str, started: float) -> None:
        self.report["seconds"][name] = round(time.monotonic() - started, 1)

    def build(self) -> BuildReport:
        torch.manual_seed(self.seed)
        started = time.monotonic()
        documents = corpus.documents(self.seed, max(700, round(DOCUMENTS * self.scale)))
        tokenizer = train_tokenizer(documents, VOCAB)
        ids = special_ids(tokenizer)
        data = encode(tokenizer, documents, ids)
        held_out = encode(tokenizer, corpus.documents(self.seed + 1, 700), ids)[:64]
        self.timed("tokenizer", started)
        verifier = self.verifier(tokenizer, ids, data)
        self.draft(verifier, tokenizer, ids, data, held_out)
        self.heads(verifier, data, held_out)
        broken.build_all(self.out / ORG, self.repo(DRAFT), self.repo(HEAD), self.repo(HEAD_REDUCED), tokenizer)
        formats.build_all(self.out / ORG)
        self.timed("total", started)
        return self.report

    def verifier(self, tokenizer: Tokenizer, ids: dict[str, int], data: torch.Tensor) -> LlamaForCausalLM:
        started = time.monotonic()
        model = LlamaForCausalLM(llama_config(ids, LAYERS))
        train_verifier(model, data, self.steps("verifier"), self.generator)
        card = f"# Toy Llama verifier\n\n{LAYERS} layers, hidden {HIDDEN}, vocab {VOCAB}, trained on SpecHub's synthetic corpus."
        write_llama(self.repo(VERIFIER), model, tokenizer, card)
        self.timed("verifier", started)
        return model

    def draft(
        self, verifier: LlamaForCausalLM, tokenizer: Tokenizer, ids: dict[str, int], data: torch.Tensor, held_out: torch.Tensor
    ) -> None:
        started = time.monotonic()
        draft = LlamaForCausalLM(llama_config(ids, 1))
        draft.model.embed_tokens.load_state_dict(verifier.model.embed_tokens.state_dict())
        draft.lm_head.load_state_dict(verifier.lm_head.state_dict())
        distill_draft(draft, verifier, data, self.steps("draft"), self.generator)
        self.report["agreement"][DRAFT] = draft_agreement(draft, verifier, held_out)
        write_llama(self.repo(DRAFT), draft, tokenizer, "# Toy 1-layer draft\n\nDistilled from spechub-toy/llama-verifier.")
        self.timed("draft", started)

    def heads(self, verifier: LlamaForCausalLM, data: torch.Tensor, held_out: torch.Tensor) -> None:
        layer = llama_config({"bos": 1, "eos": 2, "pad": 0}, 1)
        started = time.monotonic()
        head = Eagle3Head(layer, len(AUX_LAYER_IDS))
        train_head(head, verifier, data, self.steps("head"), self.generator, aux_layer_ids=AUX_LAYER_IDS)
        self.report["agreement"][HEAD] = head_agreement(head, verifier, held_out, AUX_LAYER_IDS, None)
        card = "# Toy EAGLE-3 head (speculators format)\n\nFor spechub-toy/llama-verifier; shares its embeddings and lm_head."
        write_model(self.repo(HEAD), speculators_config(layer, VOCAB), speculators_weights(head), card)
        self.timed("head", started)
        started = time.monotonic()
        draft_ids, mapping = vocab_mapping(data, VOCAB, DRAFT_VOCAB)
        reduced = Eagle3Head(layer, len(AUX_LAYER_IDS), DRAFT_VOCAB)
        reduced.lm_head.weight.data.copy_(verifier.lm_head.weight.data[draft_ids])  # type: ignore[union-attr]
        train_head(
            reduced, verifier, data, self.steps("head_reduced"), self.generator, aux_layer_ids=AUX_LAYER_IDS, draft_ids=draft_ids
        )
        self.report["agreement"][HEAD_REDUCED] = head_agreement(reduced, verifier, held_out, AUX_LAYER_IDS, draft_ids)
        card = f"# Toy EAGLE-3 head, draft vocab {DRAFT_VOCAB} (speculators format)\n\nWith t2d/d2t into the verifier's vocab."
        config = speculators_config(layer, DRAFT_VOCAB)
        write_model(self.repo(HEAD_REDUCED), config, speculators_weights(reduced, mapping), card)
        self.timed("head_reduced", started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "models")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2, help="fixed, so results do not depend on the machine's cores")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    if args.out.exists():
        shutil.rmtree(args.out)
    report = Builder(args.out, args.seed, args.scale).build()
    record: BuildRecord = {**report, "threads": args.threads, "torch": torch.__version__, "files": file_digests(args.out)}
    (args.out / "BUILD.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({"seconds": record["seconds"], "agreement": record["agreement"]}, indent=2))


if __name__ == "__main__":
    main()
