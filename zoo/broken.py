"""Deliberately broken repos for the compatibility gate, each failing one rule."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

from zoo.tokenizer import save_tokenizer

CARD = "---\nlicense: apache-2.0\ntags: [spechub-toy, broken]\n---\n\n# Deliberately broken: {why}\n"


def _copy(source: Path, target: Path, why: str) -> Path:
    shutil.copytree(source, target)
    (target / "README.md").write_text(CARD.format(why=why))
    return target


def _edit_config(repo: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    config = json.loads((repo / "config.json").read_text())
    edit(config)
    (repo / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def shuffled_tokenizer(org: Path, draft: Path, tokenizer: Tokenizer) -> None:
    """Same vocab size, different tokens: ordinary tokens swap ids pairwise."""
    repo = _copy(draft, org / "broken-tokenizer-shuffled", "a tokenizer of the same size with different tokens")
    data = json.loads(tokenizer.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    ordinary = sorted((i, t) for t, i in vocab.items() if i >= 5)
    for (i, a), (j, b) in zip(ordinary[0::2], ordinary[1::2], strict=False):
        vocab[a], vocab[b] = j, i
    save_tokenizer(Tokenizer.from_str(json.dumps(data)), repo)


def vocab_mismatch(org: Path, draft: Path) -> None:
    """A small draft whose vocab (2000) is smaller than the verifier's (2048)."""
    repo = _copy(draft, org / "broken-vocab-mismatch", "a draft with vocab 2000 against a verifier with 2048")
    config = json.loads((repo / "config.json").read_text())
    config.update(vocab_size=2000, hidden_size=64, intermediate_size=128, head_dim=16)
    (repo / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in config.items() if k != "dtype"}))
    weights = {name: t.detach().to(torch.bfloat16).contiguous() for name, t in model.state_dict().items()}
    save_file(weights, str(repo / "model.safetensors"), metadata={"format": "pt"})


def eagle3_wrong_hidden(org: Path, head: Path) -> None:
    """An EAGLE-3 head built for hidden 128 while the verifier has 256."""
    repo = _copy(head, org / "broken-eagle3-hidden", "an EAGLE-3 head with hidden 128 for a verifier with hidden 256")
    generator = torch.Generator().manual_seed(7)
    weights = {
        name: (torch.randn(tuple(s // 2 for s in t.shape), generator=generator) * 0.02).to(torch.bfloat16)
        for name, t in load_file(str(repo / "model.safetensors")).items()
    }
    save_file(weights, str(repo / "model.safetensors"), metadata={"format": "pt"})

    def shrink(config: dict[str, Any]) -> None:
        config["transformer_layer_config"].update(hidden_size=128, intermediate_size=344)
        config["target_hidden_size"] = 128

    _edit_config(repo, shrink)


def eagle3_bad_mapping(org: Path, reduced: Path) -> None:
    """t2d that does not sum to the draft vocab, and d2t offsets that leave the verifier vocab."""
    repo = _copy(reduced, org / "broken-eagle3-t2d", "t2d/d2t that break their invariants")
    weights = load_file(str(repo / "model.safetensors"))
    weights["t2d"] = weights["t2d"].clone()
    weights["t2d"][-10:] = True  # now sums past draft_vocab_size
    weights["d2t"] = weights["d2t"].clone()
    weights["d2t"][-1] = 5000  # k + d2t[k] beyond the verifier's 2048 ids
    save_file(weights, str(repo / "model.safetensors"), metadata={"format": "pt"})


def eagle3_config_variants(org: Path, head: Path) -> None:
    """Heads whose speculators config names a local path, or no verifier architectures."""
    local = _copy(head, org / "broken-eagle3-local-path", "verifier.name_or_path is a local filesystem path")
    _edit_config(local, lambda c: c["speculators_config"]["verifier"].update(name_or_path="/home/trainer/models/llama-verifier"))
    empty = _copy(head, org / "broken-eagle3-no-architectures", "verifier.architectures is empty")
    _edit_config(empty, lambda c: c["speculators_config"]["verifier"].update(architectures=[]))


def custom_code(org: Path, draft: Path) -> None:
    """A draft whose architecture exists only as code in the repo (auto_map)."""
    repo = _copy(draft, org / "broken-custom-code", "the architecture exists only as custom code")
    (repo / "modeling_toy.py").write_text(
        "# SpecHub must never import or run this file.\nraise RuntimeError('remote code was executed')\n"
    )

    def custom(config: dict[str, Any]) -> None:
        config.update(model_type="toyllama_custom", architectures=["ToyLlamaCustomForCausalLM"])
        config["auto_map"] = {"AutoModelForCausalLM": "modeling_toy.ToyLlamaCustomForCausalLM"}

    _edit_config(repo, custom)


def pickle_only(org: Path, draft: Path) -> None:
    """Weights only as a pickle (.bin); SpecHub refuses it and never unpickles it."""
    repo = org / "broken-pickle-only"
    repo.mkdir()
    shutil.copy(draft / "config.json", repo / "config.json")
    (repo / "README.md").write_text(CARD.format(why="weights only as a pickle (pytorch_model.bin)"))
    torch.save({"lm_head.weight": torch.zeros(4, 4)}, repo / "pytorch_model.bin")


def config_not_json(org: Path, draft: Path) -> None:
    repo = _copy(draft, org / "broken-config-not-json", "config.json is not JSON")
    (repo / "config.json").write_text("{ this is not: json,\n")


def build_all(org: Path, draft: Path, head: Path, reduced: Path, tokenizer: Tokenizer) -> None:
    """Build every broken repo next to the good ones."""
    shuffled_tokenizer(org, draft, tokenizer)
    vocab_mismatch(org, draft)
    eagle3_wrong_hidden(org, head)
    eagle3_bad_mapping(org, reduced)
    eagle3_config_variants(org, head)
    custom_code(org, draft)
    pickle_only(org, draft)
    config_not_json(org, draft)
