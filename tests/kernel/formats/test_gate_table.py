"""The gate on hand-written configs modelled on public speculator repos: one row per judgement."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernel.formats import judge
from kernel.formats.findings import HINTS, Severity
from tests.kernel.formats.configs import (
    EAGLE3_LLAMA,
    GEMMA3_4B,
    LLAMA_31_8B,
    QWEN3_8B,
    edited,
    gate_input,
    mapping,
)

LLAMA_MAPPING = mapping(32000, 128256)
SMALL_LLAMA = {**LLAMA_31_8B, "hidden_size": 2048, "num_hidden_layers": 16, "max_position_embeddings": 131072}
QWEN3_EAGLE = edited(
    EAGLE3_LLAMA,
    draft_vocab_size=None,
    eagle_aux_hidden_state_layer_ids=[2, 18, 33],
    speculators_config__verifier__name_or_path="Qwen/Qwen3-8B",
    speculators_config__verifier__architectures=["Qwen3ForCausalLM"],
    transformer_layer_config__model_type="qwen3",
    transformer_layer_config__vocab_size=151936,
)
PEAGLE = edited(EAGLE3_LLAMA, speculators_model_type="peagle", mask_token_id=128255)
DFLASH = edited(
    EAGLE3_LLAMA,
    speculators_model_type="dflash",
    draft_vocab_size=None,
    mask_token_id=128255,
    aux_hidden_state_layer_ids=[1, 16, 32],
)
MEDUSA = {"model_type": "medusa", "architectures": ["MedusaModel"], "num_heads": 4, "hidden_size": 4096, "vocab_size": 128256}

ROWS: list[tuple[str, dict[str, Any], set[str], set[str]]] = [
    # id, gate_input kwargs, expected error codes (exactly), expected other codes (at least)
    (
        "public-eagle3-llama-3.1-8b",
        {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING},
        set(),
        {"gate:safety-auto-map", "gate:geometry-aux-default", "gate:geometry-context", "gate:tokenizer-shared"},
    ),
    ("eagle3-reduced-vocab-without-t2d-d2t", {"draft": EAGLE3_LLAMA}, {"gate:mapping-missing"}, set()),
    (
        "eagle3-t2d-over-the-wrong-vocab",
        {"draft": EAGLE3_LLAMA, "tensors": {**LLAMA_MAPPING, **{"t2d": mapping(32000, 128000)["t2d"]}}},
        {"gate:mapping-t2d"},
        set(),
    ),
    ("eagle3-qwen3-8b", {"draft": QWEN3_EAGLE, "verifier": QWEN3_8B, "verifier_id": "Qwen/Qwen3-8B"}, set(), set()),
    (
        "eagle3-layer-type-vllm-cannot-build",
        {"draft": edited(EAGLE3_LLAMA, transformer_layer_config__model_type="mistral"), "tensors": LLAMA_MAPPING},
        {"gate:format-unsupported"},
        set(),
    ),
    (
        "hass-is-legacy-eagle",
        {"draft": edited(EAGLE3_LLAMA, speculators_model_type="eagle", layernorms=True), "tensors": LLAMA_MAPPING},
        {"gate:format-unsupported"},
        set(),
    ),
    (
        "legacy-independent",
        {"draft": edited(EAGLE3_LLAMA, speculators_model_type="independent"), "tensors": LLAMA_MAPPING},
        {"gate:format-unsupported"},
        set(),
    ),
    (
        "legacy-mtp-type",
        {"draft": edited(EAGLE3_LLAMA, speculators_model_type="mtp"), "tensors": LLAMA_MAPPING},
        {"gate:format-unsupported"},
        set(),
    ),
    ("peagle", {"draft": PEAGLE, "tensors": LLAMA_MAPPING}, set(), set()),
    (
        "peagle-without-mask-token",
        {"draft": edited(PEAGLE, mask_token_id=None), "tensors": LLAMA_MAPPING},
        {"gate:format-missing-key"},
        set(),
    ),
    ("dflash-one-based-aux-layers", {"draft": DFLASH}, set(), set()),
    (
        "dflash-aux-layer-zero",
        {"draft": edited(DFLASH, aux_hidden_state_layer_ids=[0, 16, 31])},
        {"gate:geometry-aux-layers"},
        set(),
    ),
    (
        "mlp-speculator-unserved",
        {"draft": {"model_type": "mlp_speculator", "n_predict": 3, "emb_dim": 4096, "vocab_size": 128256}},
        {"gate:format-unsupported"},
        set(),
    ),
    ("medusa-k-divisible", {"draft": MEDUSA, "k": 8}, set(), set()),
    ("medusa-k-not-divisible", {"draft": MEDUSA, "k": 6}, {"gate:k-divisible"}, set()),
    (
        "default-proposal-not-listed",
        {"draft": edited(EAGLE3_LLAMA, speculators_config__default_proposal_method="tree"), "tensors": LLAMA_MAPPING},
        {"gate:format-default-proposal"},
        set(),
    ),
    (
        "verifier-unix-path",
        {"draft": edited(EAGLE3_LLAMA, speculators_config__verifier__name_or_path="/models/llama"), "tensors": LLAMA_MAPPING},
        {"gate:verifier-local-path"},
        set(),
    ),
    (
        "verifier-relative-path",
        {"draft": edited(EAGLE3_LLAMA, speculators_config__verifier__name_or_path="./llama"), "tensors": LLAMA_MAPPING},
        {"gate:verifier-local-path"},
        set(),
    ),
    (
        "verifier-windows-path",
        {"draft": edited(EAGLE3_LLAMA, speculators_config__verifier__name_or_path="C:\\models\\llama"), "tensors": LLAMA_MAPPING},
        {"gate:verifier-local-path"},
        set(),
    ),
    (
        "verifier-home-path",
        {"draft": edited(EAGLE3_LLAMA, speculators_config__verifier__name_or_path="~/llama"), "tensors": LLAMA_MAPPING},
        {"gate:verifier-local-path"},
        set(),
    ),
    (
        "verifier-named-differently",
        {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING, "verifier_id": "meta-llama/Llama-3.3-70B-Instruct"},
        {"gate:verifier-name-mismatch"},
        set(),
    ),
    (
        "verifier-name-case-differs",
        {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING, "verifier_id": "meta-llama/llama-3.1-8b-instruct"},
        set(),
        set(),
    ),
    (
        "verifier-architectures-empty",
        {"draft": edited(EAGLE3_LLAMA, speculators_config__verifier__architectures=[]), "tensors": LLAMA_MAPPING},
        set(),
        {"gate:verifier-architectures-empty"},
    ),
    (
        "verifier-architectures-differ",
        {
            "draft": edited(EAGLE3_LLAMA, speculators_config__verifier__architectures=["Qwen3ForCausalLM"]),
            "tensors": LLAMA_MAPPING,
        },
        {"gate:verifier-architectures-mismatch"},
        set(),
    ),
    (
        "aux-layer-past-the-last",
        {"draft": edited(EAGLE3_LLAMA, eagle_aux_hidden_state_layer_ids=[2, 16, 32]), "tensors": LLAMA_MAPPING},
        {"gate:geometry-aux-layers"},
        set(),
    ),
    (
        "aux-layers-not-increasing",
        {"draft": edited(EAGLE3_LLAMA, eagle_aux_hidden_state_layer_ids=[16, 2, 29]), "tensors": LLAMA_MAPPING},
        {"gate:geometry-aux-layers"},
        set(),
    ),
    (
        "aux-layers-repeated",
        {"draft": edited(EAGLE3_LLAMA, eagle_aux_hidden_state_layer_ids=[2, 2, 29]), "tensors": LLAMA_MAPPING},
        {"gate:geometry-aux-layers"},
        set(),
    ),
    (
        "head-built-for-a-smaller-verifier",
        {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING, "verifier": SMALL_LLAMA},
        {"gate:geometry-hidden-size"},
        set(),
    ),
    (
        "target-hidden-size-wins",
        {"draft": edited(EAGLE3_LLAMA, target_hidden_size=2048), "tensors": LLAMA_MAPPING, "verifier": SMALL_LLAMA},
        set(),
        set(),
    ),
    (
        "layer-vocab-differs",
        {"draft": edited(EAGLE3_LLAMA, transformer_layer_config__vocab_size=128000), "tensors": LLAMA_MAPPING},
        {"gate:geometry-vocab-size"},
        set(),
    ),
    (
        "multimodal-verifier-text-config",
        {
            "draft": edited(
                EAGLE3_LLAMA,
                draft_vocab_size=None,
                transformer_layer_config__hidden_size=2560,
                transformer_layer_config__vocab_size=262208,
                speculators_config__verifier__architectures=["Gemma3ForConditionalGeneration"],
                transformer_layer_config__model_type="llama",
            ),
            "verifier": GEMMA3_4B,
        },
        {"gate:family-no-eagle3"},  # the text_config is read, and vLLM's Gemma3ForConditionalGeneration gives no aux states
        set(),
    ),
    (
        "missing-transformer-layer-config",
        {"draft": edited(EAGLE3_LLAMA, transformer_layer_config=None), "tensors": LLAMA_MAPPING},
        {"gate:format-missing-key"},
        set(),
    ),
    ("k-zero", {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING, "k": 0}, {"gate:k-range"}, set()),
    ("k-too-large", {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING, "k": 17}, {"gate:k-range"}, set()),
    ("k-differs-from-the-trained-k", {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING, "k": 3}, set(), {"gate:k-trained"}),
    (
        "draft-model-llama-3.2-1b",
        {"draft": {**SMALL_LLAMA, "hidden_size": 2048}, "method": "draft_model"},
        set(),
        {"gate:tokenizer-not-shipped"},
    ),
    (
        "draft-model-other-vocab",
        {"draft": {**QWEN3_8B, "bos_token_id": None}, "method": "draft_model"},
        {"gate:tokenizer-vocab-size", "gate:tokenizer-special-ids"},
        set(),
    ),
    ("draft-model-other-eos", {"draft": {**SMALL_LLAMA, "eos_token_id": 2}}, {"gate:tokenizer-special-ids"}, set()),
    (
        "draft-model-auto-map-on-a-known-architecture",
        {"draft": {**SMALL_LLAMA, "auto_map": {"AutoModelForCausalLM": "m.Llama"}}},
        set(),
        {"gate:safety-auto-map"},
    ),
    (
        "draft-model-architecture-vllm-lacks",
        {"draft": {**SMALL_LLAMA, "architectures": ["ToyForCausalLM"]}},
        {"gate:format-unsupported"},
        set(),
    ),
    (
        "speculator-asked-as-draft-model",
        {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING, "method": "draft_model"},
        {"gate:format-method-mismatch"},
        set(),
    ),
    ("ngram-needs-no-draft", {"draft": SMALL_LLAMA, "method": "ngram"}, {"gate:format-method-mismatch"}, set()),
    ("draft-model-needs-a-draft", {"draft": None, "draftless": True, "method": "draft_model"}, {"gate:format-unknown"}, set()),
    ("ngram", {"draft": None, "draftless": True, "method": "ngram", "options": {"prompt_lookup_max": 4}}, set(), set()),
    ("suffix", {"draft": None, "draftless": True, "method": "suffix"}, set(), set()),
    # Options that make speculation lossy are refused: synthetic acceptance invents the counters and the outputs.
    ("synthetic-rejection", {"draft": None, "draftless": True, "method": "ngram",
                             "options": {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 3.5}},
     {"gate:lossless-rejection-method", "gate:lossless-synthetic"}, set()),
    # Block verification (Sun et al.) keeps the verifier's distribution: lossless (issue 54 §4).
    ("block-verification", {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING, "options": {"rejection_sample_method": "block"}},
     set(), set()),
    ("standard-rejection-said-aloud", {"draft": EAGLE3_LLAMA, "tensors": LLAMA_MAPPING,
                                       "options": {"rejection_sample_method": "standard"}}, set(), set()),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "errors", "others"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_the_gate_judges_each_public_style_config(kwargs, errors, others):
    report = judge(gate_input(**kwargs))
    found_errors = {f.code for f in report.findings if f.severity == Severity.ERROR}
    assert found_errors == errors, [f.as_dict() for f in report.findings]
    assert others <= {f.code for f in report.findings}, [f.as_dict() for f in report.findings]
    assert report.compatible is (not errors)
    assert (report.recipe is not None) is (not errors)
    for finding in report.findings:
        assert finding.code.startswith(f"gate:{finding.rule}-") and finding.code in HINTS
        assert finding.message


def test_the_public_eagle3_config_is_judged_at_its_own_k_and_its_default_aux_layers_are_recorded():
    report = judge(gate_input(EAGLE3_LLAMA, tensors=LLAMA_MAPPING))
    assert (report.method, report.k) == ("eagle3", 5)
    default = next(f for f in report.findings if f.code == "gate:geometry-aux-default")
    assert "[2, 16, 29]" in default.message
    assert report.format.extra == {}  # every field of the public config was understood
    assert report.recipe is not None
    assert report.recipe.speculative_config == {
        "method": "eagle3",
        "num_speculative_tokens": 5,
        "model": "org/draft",
        "revision": "a" * 40,
    }


def test_unknown_fields_are_kept_in_the_description():
    report = judge(gate_input(edited(EAGLE3_LLAMA, future_field={"x": 1}), tensors=LLAMA_MAPPING))
    assert report.format.extra == {"future_field": {"x": 1}}
    assert report.as_dict()["format"]["extra"] == {"future_field": {"x": 1}}


def test_hass_is_described_as_an_eagle_variant():
    report = judge(gate_input(edited(EAGLE3_LLAMA, speculators_model_type="eagle", layernorms=True)))
    assert (report.format.algorithm, report.format.variant) == ("eagle", "hass")


def test_peagle_is_served_as_parallel_eagle3():
    report = judge(gate_input(PEAGLE, tensors=LLAMA_MAPPING))
    assert report.recipe is not None
    assert report.recipe.speculative_config["method"] == "eagle3"
    assert report.recipe.speculative_config["parallel_drafting"] is True


def test_medusa_and_ngram_describe_their_heads():
    medusa = judge(gate_input(MEDUSA, k=4))
    assert (medusa.format.kind, medusa.method, medusa.format.n_predict) == ("medusa", "medusa", 4)
    ngram = judge(gate_input(None, draftless=True, method="ngram", options={"prompt_lookup_min": 2}))
    assert ngram.recipe is not None
    assert ngram.recipe.speculative_config == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2}
    assert "model" not in ngram.recipe.speculative_config


@pytest.mark.parametrize(("kwargs", "errors", "others"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_the_stored_report_is_plain_json(kwargs, errors, others):
    document = judge(gate_input(**kwargs)).as_dict()
    assert json.loads(json.dumps(document)) == document
