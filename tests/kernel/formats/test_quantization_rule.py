"""The quantization rule (issue 53 §2): a quantized draft or verifier passes only in a scheme the pinned build was seen to
serve, and anything else is refused with the reason, in the engine's own words where it gave some."""

from __future__ import annotations

import json

from kernel.formats import judge
from kernel.formats.quantization import QUANTIZATION_METHODS, UNMEASURED, scheme
from kernel.formats.vllm_support import VLLM_VERSION
from tests.kernel.formats.configs import edited, gate_input
from tests.support.processes import ROOT
from zoo.quantized import MXFP4_CONFIG, TORCHAO_CONFIG, compressed_tensors_config, mxfp4_blocks

ZOO = ROOT / "zoo" / "models" / "spechub-toy"
DRAFT = json.loads((ZOO / "llama-draft-1l" / "config.json").read_text())
VERIFIER = json.loads((ZOO / "llama-verifier" / "config.json").read_text())


def codes(draft: dict[str, object], verifier: dict[str, object] = VERIFIER) -> dict[str, str]:
    report = judge(gate_input(draft, verifier, verifier_id="spechub-toy/llama-verifier", method="draft_model"))
    return {f.code: f.message for f in report.findings if f.rule == "quantization"}


def test_the_zoos_int8_draft_and_verifier_are_served():
    draft = json.loads((ZOO / "llama-draft-1l-w8a8-int8" / "config.json").read_text())  # built by zoo/variants.py
    verifier = json.loads((ZOO / "llama-verifier-w8a8-int8" / "config.json").read_text())
    assert scheme(draft) == scheme(verifier) == "compressed-tensors:w8a8-int8"
    found = codes(draft, verifier)
    assert list(found) == ["gate:quantization-served"]
    assert "greedy equivalence is judged against this quantized verifier" in found["gate:quantization-served"]
    assert codes(DRAFT) == {}  # unquantized: nothing to say


def test_fp8_dynamic_is_served_as_the_probe_found():
    assert scheme({"quantization_config": compressed_tensors_config("float")}) == "compressed-tensors:w8a8-fp8"
    assert list(codes(edited(DRAFT, quantization_config=compressed_tensors_config("float")))) == ["gate:quantization-served"]


def test_torchao_is_refused_with_the_engines_own_error():
    found = codes(edited(DRAFT, quantization_config=TORCHAO_CONFIG))
    assert list(found) == ["gate:quantization-unserved"]
    assert f"vLLM {VLLM_VERSION} does not serve" in found["gate:quantization-unserved"]
    assert "Please install torchao>=0.10.0" in found["gate:quantization-unserved"]
    report = judge(gate_input(edited(DRAFT, quantization_config=TORCHAO_CONFIG), VERIFIER, method="draft_model"))
    assert not report.compatible


def test_gpt_oss_in_mxfp4_as_published_is_refused_with_the_engines_own_error():
    """The toy gpt-oss verifier with its experts in MXFP4 (zoo/quantized.py), as scripts/probe_quantized.py served it."""
    verifier = json.loads((ZOO / "gpt-oss-verifier-mxfp4" / "config.json").read_text())  # built by zoo/variants.py
    assert scheme(verifier) == "mxfp4" and verifier["quantization_config"] == MXFP4_CONFIG
    head = json.loads((ZOO / "gpt-oss-eagle3-head" / "config.json").read_text())
    report = judge(gate_input(head, verifier, verifier_id="spechub-toy/gpt-oss-verifier"))
    found = {f.code: f.message for f in report.findings if f.rule == "quantization"}
    assert list(found) == ["gate:quantization-unserved"] and not report.compatible
    assert "No MXFP4 MoE backend supports the deployment configuration" in found["gate:quantization-unserved"]


def test_the_mxfp4_blocks_dequantize_to_the_weights_within_fp4s_step_by_transformers_own_reader():
    import torch
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    weight = (torch.randn(2, 64, 96, generator=torch.Generator().manual_seed(0)) * 0.05).to(torch.bfloat16)
    blocks, scales = mxfp4_blocks(weight)
    assert blocks.shape == (2, 96, 2, 16) and scales.shape == (2, 96, 2) and blocks.dtype == scales.dtype == torch.uint8
    back = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)
    peak = weight.float().abs().amax()
    assert back.shape == weight.shape and (back - weight.float()).abs().max() <= peak / 6  # one FP4 step at most
    assert mxfp4_blocks(torch.zeros(1, 32, 32))[0].eq(0).all()  # an all-zero block is zeros, not NaN


def test_a_scheme_never_seen_to_load_is_refused_as_unmeasured_and_an_unknown_method_as_unknown():
    w4a16 = edited(compressed_tensors_config("int"), config_groups__group_0__weights__num_bits=4,
                   config_groups__group_0__input_activations=None)  # fmt: skip
    found = codes(edited(VERIFIER, quantization_config=w4a16), VERIFIER)
    assert (
        "compressed-tensors:w4a16-int4" in found["gate:quantization-unserved"]
        and UNMEASURED in found["gate:quantization-unserved"]
    )
    assert list(codes(edited(DRAFT, quantization_config={"quant_method": "bitsnbytes-9"}))) == ["gate:quantization-unknown"]


def test_a_hostile_quantization_config_is_a_finding_not_a_crash():
    for odd in ([1], "int8", {"quant_method": 3}, {"quant_method": "compressed-tensors", "config_groups": {"g": "x"}}):
        assert list(codes(edited(DRAFT, quantization_config=odd))) == ["gate:quantization-unreadable"]


def test_the_methods_the_rule_knows_are_exactly_vllms():
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS as VLLMS

    assert set(VLLMS) == QUANTIZATION_METHODS
