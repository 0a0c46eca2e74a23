"""The other formats people publish (issue 26 §5): EAGLE-1 heads, vLLM's legacy eagle wrapper, speculators mtp.

An EAGLE-1 head declares a plain LlamaForCausalLM with one layer; only its tensors (fc.weight, layers.0.* without
the 'model.' prefix) tell it from a one-layer draft model, so the gate reads them from the safetensors headers.
That vLLM serves what the gate accepts here, and refuses what it refuses, is tests/zoo/test_zoo_in_vllm.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernel.formats import Report, judge
from kernel.formats.inputs import GateInput, RepoMetadata
from kernel.repos import LocalRepo, gate_check
from tests.kernel.formats.configs import edited

pytestmark = pytest.mark.unit
ZOO = Path(__file__).parents[3] / "zoo" / "models" / "spechub-toy"
VERIFIER_ID = "spechub-toy/llama-verifier"
VERIFIER = LocalRepo(ZOO / "llama-verifier", VERIFIER_ID)


def zoo(name: str, method: str | None = None) -> Report:
    return gate_check(verifier=VERIFIER, verifier_id=VERIFIER_ID, draft=LocalRepo(ZOO / name, f"spechub-toy/{name}"),
                      method=method, k=4)  # fmt: skip


def codes(report: Report) -> set[str]:
    return {f.code for f in report.errors}


def head(name: str) -> RepoMetadata:
    return LocalRepo(ZOO / name, f"spechub-toy/{name}").metadata()


def variant(name: str, config: Any = None, **tensors: dict[str, Any] | None) -> Report:
    """Judge a zoo head with its config replaced and its header's tensors added (a dict) or removed (None)."""
    meta = head(name)
    header = {**meta.safetensors["model.safetensors"]}
    for tensor, info in tensors.items():
        if info is None:
            header.pop(tensor.replace("__", "."))
        else:
            header[tensor.replace("__", ".")] = info
    draft = RepoMetadata(repo_id=meta.repo_id, sha="a" * 40, files=meta.files, config=meta.config if config is None else config,
                         tokenizer=None, tokenizer_config=None, safetensors={"model.safetensors": header})  # fmt: skip
    return judge(GateInput(verifier=VERIFIER.metadata(), verifier_id=VERIFIER_ID, draft=draft, k=4))


def bf16(*shape: int) -> dict[str, Any]:
    return {"dtype": "BF16", "shape": list(shape), "data_offsets": [0, 0]}


def test_an_eagle1_head_is_told_from_a_one_layer_draft_by_its_tensors_and_served_with_method_eagle():
    report = zoo("eagle1-head")
    assert report.compatible, report.as_dict()
    assert (report.format.kind, report.method) == ("eagle1", "eagle")
    assert report.recipe is not None and report.recipe.speculative_config["method"] == "eagle"
    same_config = zoo("llama-draft-1l")
    assert head("llama-draft-1l").config["architectures"] == head("eagle1-head").config["architectures"]
    assert (same_config.format.kind, same_config.method) == ("causal_lm", "draft_model")


def test_an_eagle1_head_asked_for_as_a_draft_model_and_a_draft_model_asked_for_as_eagle_are_refused():
    assert codes(zoo("eagle1-head", "draft_model")) == {"gate:format-method-mismatch"}
    assert codes(zoo("llama-draft-1l", "eagle")) == {"gate:format-method-mismatch"}


@pytest.mark.parametrize(
    ("tensors", "message"),
    [
        ({"lm_head__weight": bf16(2048, 256)}, "lm_head.weight"),
        ({"fc__bias": bf16(256)}, "fc.bias"),
        ({"layers__0__input_layernorm__weight": bf16(256)}, "layers.0.input_layernorm.weight"),
        ({"model__layers__0__mlp__up_proj__weight": bf16(688, 256)}, "model.layers.0.mlp.up_proj.weight"),
    ],
    ids=["own-lm-head", "fc-bias", "layer-0-input-norm", "model-prefix"],
)
def test_an_eagle1_head_with_a_tensor_vllm_cannot_place_is_refused_naming_it(tensors, message):
    report = variant("eagle1-head", **tensors)
    assert codes(report) == {"gate:format-head-tensors"}
    assert any(message in f.message for f in report.errors)


def test_an_eagle1_head_built_for_another_hidden_size_or_vocab_is_refused():
    assert codes(variant("eagle1-head", fc__weight=bf16(256, 768))) == {"gate:geometry-weights"}
    config = head("eagle1-head").config
    assert "gate:geometry-hidden-size" in codes(variant("eagle1-head", edited(config, hidden_size=512)))
    assert codes(variant("eagle1-head", edited(config, vocab_size=4096))) == {"gate:geometry-vocab-size"}


def test_an_eagle1_head_on_a_base_vllm_has_no_eagle_head_for_is_refused_with_the_architecture_it_would_build():
    report = variant("eagle1-head", edited(head("eagle1-head").config, architectures=["Qwen2ForCausalLM"]))
    assert codes(report) == {"gate:format-unsupported"}
    assert "EagleQwen2ForCausalLM" in report.errors[0].message


def test_the_legacy_eagle_wrapper_is_read_from_its_model_config_and_served_with_its_method():
    report = zoo("eagle1-head-wrapped")
    assert report.compatible, report.as_dict()
    assert (report.format.kind, report.method, report.format.geometry.hidden_size) == ("eagle_wrapper", "eagle", 256)
    assert report.format.architectures == ("LlamaForCausalLM",)  # the wrapper's own EAGLEModel is ignored, as by vLLM


HOSTILE_WRAPPERS = "no-model model-not-an-object no-model-type bad-hidden-size no-architectures medusa-method dflash-method "
HOSTILE_WRAPPERS += "method-not-text other-vocab"


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"model": None}, "gate:format-missing-key"),
        ({"model": ["llama"]}, "gate:format-bad-value"),
        ({"model__model_type": None}, "gate:format-missing-key"),
        ({"model__hidden_size": "256"}, "gate:format-bad-value"),
        ({"model__architectures": None}, "gate:format-missing-key"),
        ({"method": "medusa"}, "gate:format-unsupported"),
        ({"method": "dflash"}, "gate:format-unsupported"),
        ({"method": 3}, "gate:format-bad-value"),
        ({"model__vocab_size": 4096}, "gate:geometry-vocab-size"),
    ],
    ids=HOSTILE_WRAPPERS.split(),
)
def test_a_hostile_eagle_wrapper_gets_a_clear_finding(changes, code):
    report = variant("eagle1-head-wrapped", edited(head("eagle1-head-wrapped").config, **changes))
    assert code in codes(report), report.as_dict()


def test_a_wrapper_saying_eagle3_is_judged_as_the_eagle3_head_vllm_builds():
    config = edited(head("eagle1-head-wrapped").config, method="eagle3")
    report = variant("eagle1-head-wrapped", config)
    assert (report.method, report.format.algorithm) == ("eagle3", "eagle3")
    assert "gate:geometry-weights" in codes(report)  # an EAGLE-1 fc is [h, 2h]; an EAGLE-3 one [h, 3h]


def test_the_speculators_mtp_type_is_refused_as_a_type_vllm_does_not_load():
    report = zoo("mtp-speculator")
    assert codes(report) == {"gate:format-unsupported"}
    assert "'mtp'" in report.errors[0].message
    broken = variant("mtp-speculator", edited(head("mtp-speculator").config, transformer_layer_config=None))
    assert codes(broken) == {"gate:format-unsupported", "gate:format-missing-key"}
