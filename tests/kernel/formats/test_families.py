"""The gate on the families people run (issue 60): their published configs at full size, and what differs by family."""

from __future__ import annotations

from typing import Any

import pytest

from kernel.formats import judge
from kernel.formats.families import family_of
from kernel.formats.findings import Severity
from tests.kernel.formats.configs import edited, gate_input, mapping
from tests.kernel.formats.published import (
    GEMMA4_31B,
    GEMMA4_31B_ASSISTANT,
    GEMMA4_31B_TEXT,
    GPT_OSS_20B,
    GPT_OSS_20B_EAGLE3,
    GPT_OSS_120B,
    QWEN3_8B_EAGLE3,
    QWEN3_8B_FULL,
)

GPT_OSS_MAPPING = mapping(64000, 201088)


def judged(**kwargs: Any) -> tuple[set[str], set[str], dict[str, str]]:
    """Return (error codes, other codes, message by code) of the gate's report."""
    report = judge(gate_input(**kwargs))
    errors = {f.code for f in report.findings if f.severity == Severity.ERROR}
    others = {f.code for f in report.findings if f.severity != Severity.ERROR}
    return errors, others, {f.code: f.message for f in report.findings}


def test_the_published_qwen3_8b_speculator_is_compatible_and_named_qwen3():
    errors, others, messages = judged(draft=QWEN3_8B_EAGLE3, verifier=QWEN3_8B_FULL, verifier_id="Qwen/Qwen3-8B")
    assert errors == set()
    assert {"gate:family-named", "gate:geometry-aux-default"} <= others
    assert messages["gate:family-named"] == "The verifier is a Qwen3 model (Qwen3ForCausalLM)."
    assert "[2, 18, 33] for 36 layers" in messages["gate:geometry-aux-default"]


def test_the_published_gpt_oss_20b_speculator_is_refused_only_for_its_mxfp4_verifier_on_cpu_workers():
    errors, others, messages = judged(
        draft=GPT_OSS_20B_EAGLE3, verifier=GPT_OSS_20B, verifier_id="openai/gpt-oss-20b", tensors=GPT_OSS_MAPPING
    )
    assert errors == {"gate:quantization-unserved"}
    assert "mxfp4" in messages["gate:quantization-unserved"]
    assert {"gate:family-named", "gate:family-attention-sinks", "gate:family-sliding-window-layers"} <= others
    assert messages["gate:family-sliding-window-layers"].startswith("12 of the verifier's 24 layers attend over the last 128")
    assert "[2, 12, 21] for 24 layers" in messages["gate:geometry-aux-default"]


def test_the_20b_speculator_brought_to_gpt_oss_120b_is_refused_for_naming_another_verifier():
    errors, _, messages = judged(
        draft=GPT_OSS_20B_EAGLE3, verifier=GPT_OSS_120B, verifier_id="openai/gpt-oss-120b", tensors=GPT_OSS_MAPPING
    )
    assert errors == {"gate:verifier-name-mismatch", "gate:quantization-unserved"}
    assert messages["gate:family-sliding-window-layers"].startswith("18 of the verifier's 36 layers")


def test_the_published_gemma_4_assistant_is_served_as_mtp_and_its_multimodal_verifier_is_named_unloadable_on_cpu():
    report = judge(gate_input(GEMMA4_31B_ASSISTANT, GEMMA4_31B, verifier_id="google/gemma-4-31B-it"))
    codes = {f.code: f for f in report.findings}
    assert report.compatible and report.method == "mtp" and report.format.kind == "gemma4_assistant"
    assert codes["gate:family-cpu-unloadable"].severity == Severity.WARNING
    assert "Gemma4Processor" in codes["gate:family-cpu-unloadable"].message
    assert codes["gate:family-softcap"].message.startswith("The verifier soft-caps its logits at 30.0")
    assert "50 of the verifier's 60 layers" in codes["gate:family-sliding-window-layers"].message
    assert report.recipe is not None and '"method":"mtp"' in report.recipe.serve


def test_gemma_4_as_text_only_takes_its_assistant_without_a_warning():
    errors, others, _ = judged(draft=GEMMA4_31B_ASSISTANT, verifier=GEMMA4_31B_TEXT, verifier_id="google/gemma-4-31B-it")
    assert errors == set() and "gate:family-cpu-unloadable" not in others


@pytest.mark.parametrize(
    ("assistant", "verifier", "expected"),
    [
        (edited(GEMMA4_31B_ASSISTANT, backbone_hidden_size=2816), GEMMA4_31B, {"gate:family-assistant-backbone"}),
        (edited(GEMMA4_31B_ASSISTANT, text_config__vocab_size=1000), GEMMA4_31B, {"gate:family-assistant-vocab"}),
        (GEMMA4_31B_ASSISTANT, QWEN3_8B_FULL, {"gate:family-assistant-verifier", "gate:family-assistant-backbone",
                                                "gate:family-assistant-vocab"}),
        (edited(GEMMA4_31B_ASSISTANT, backbone_hidden_size=None), GEMMA4_31B, {"gate:format-missing-key"}),
    ],
    ids=["backbone", "vocab", "qwen3-verifier", "no-backbone"],
)  # fmt: skip
def test_an_assistant_must_fit_its_verifiers_backbone_vocab_and_family(assistant, verifier, expected):
    errors, _, _ = judged(draft=assistant, verifier=verifier)
    assert errors == expected


@pytest.mark.parametrize(
    ("changes", "code", "says"),
    [
        ({"layer_types": ["sliding_attention"] * 3}, "gate:family-layer-types", "names 3 layers; num_hidden_layers is 24"),
        ({"layer_types": ["local"] * 24}, "gate:family-layer-types", "must list 'sliding_attention' or 'full_attention'"),
        ({"sliding_window": None}, "gate:family-sliding-window", "12 sliding-window layers but sliding_window is None"),
        ({"sliding_window": True}, "gate:family-sliding-window", "sliding_window is True"),
    ],
    ids=["count", "kind", "no-window", "bool-window"],
)
def test_a_verifiers_layer_types_and_window_must_agree(changes, code, says):
    verifier = {**GPT_OSS_20B, **changes}
    verifier.pop("quantization_config")
    errors, _, messages = judged(draft=GPT_OSS_20B_EAGLE3, verifier=verifier, verifier_id="openai/gpt-oss-20b",
                                 tensors=GPT_OSS_MAPPING)  # fmt: skip
    assert errors == {code}
    assert says in messages[code]


@pytest.mark.parametrize(
    ("architectures", "family"),
    [
        (["LlamaForCausalLM"], "llama"),
        (["Qwen3ForCausalLM"], "qwen3"),
        (["GptOssForCausalLM"], "gpt-oss"),
        (["Gemma4ForConditionalGeneration"], "gemma4"),
        (["Unknown", "Gemma4ForCausalLM"], "gemma4"),
        (["Unknown"], None),
        ("GptOssForCausalLM", None),
        ([3, None], None),
    ],
)
def test_the_family_is_read_from_the_first_known_architecture(architectures, family):
    assert family_of(architectures) == family
