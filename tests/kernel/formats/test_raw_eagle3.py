"""The raw EAGLE-3 format (SpecForge, the original EAGLE-3 code): LlamaForCausalLMEagle3, the method derived as eagle3.

That vLLM serves what the gate accepts here, as the same head as the speculators format, is
tests/zoo/test_zoo_in_vllm.py's; that vLLM registers each architecture the gate reads as this format,
tests/kernel/formats/test_vllm_support.py's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernel.formats import Report
from kernel.repos import LocalRepo, gate_check

pytestmark = pytest.mark.unit
ZOO = Path(__file__).parents[3] / "zoo" / "models" / "spechub-toy"
VERIFIER = LocalRepo(ZOO / "llama-verifier", "spechub-toy/llama-verifier")


def judged(draft: Path, method: str | None = None) -> Report:
    return gate_check(verifier=VERIFIER, verifier_id="spechub-toy/llama-verifier",
                      draft=LocalRepo(draft, "spechub-toy/eagle3-head-raw"), method=method, k=4)  # fmt: skip


def edited(tmp_path: Path, **changes: object) -> Path:
    folder = tmp_path / "eagle3-head-raw"
    shutil.copytree(ZOO / "eagle3-head-raw", folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_the_raw_format_is_accepted_with_the_method_derived_as_eagle3():
    report = judged(ZOO / "eagle3-head-raw")
    assert report.compatible, report.as_dict()
    assert report.recipe is not None and report.recipe.speculative_config["method"] == "eagle3"
    assert report.as_dict()["format"]["kind"] == "eagle3"
    asked = judged(ZOO / "eagle3-head-raw", "draft_model")
    assert [f.code for f in asked.errors] == ["gate:format-method-mismatch"]


def test_a_raw_head_built_for_another_vocab_or_other_layers_is_refused_naming_its_field(tmp_path):
    vocab = judged(edited(tmp_path, vocab_size=4096))
    assert "gate:geometry-vocab-size" in {f.code for f in vocab.errors}
    assert any(f.message.startswith("vocab_size is 4096") for f in vocab.errors)
    shutil.rmtree(tmp_path / "eagle3-head-raw")
    layers = judged(edited(tmp_path, eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2, 40]}))
    assert "gate:geometry-aux-layers" in {f.code for f in layers.errors}


def test_a_raw_head_without_its_sizes_is_refused_rather_than_read_with_llamas_defaults(tmp_path):
    config = json.loads((ZOO / "eagle3-head-raw" / "config.json").read_text())
    del config["hidden_size"]
    folder = edited(tmp_path)
    (folder / "config.json").write_text(json.dumps(config))
    assert "gate:format-missing-key" in {f.code for f in judged(folder).errors}
