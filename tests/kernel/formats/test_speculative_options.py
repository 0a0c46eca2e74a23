"""The gate follows the engine's newer speculative-config keys (issue 54 §4): one test per rule."""

from __future__ import annotations

from typing import Any

import pytest

from kernel import schedule
from kernel.formats import judge
from kernel.formats.findings import Severity
from kernel.formats.vllm_support import VLLM_VERSION, dynamic_k_takes_ranges
from kernel.spec import ModelRef, RunSpec, spec_of
from tests.kernel.formats.configs import EAGLE3_LLAMA, gate_input, mapping

LLAMA_MAPPING = mapping(32000, 128256)


def judged(tensor_parallel_size: int = 1, **options: object) -> Any:
    return judge(gate_input(EAGLE3_LLAMA, tensors=LLAMA_MAPPING, options=options, tensor_parallel_size=tensor_parallel_size))


def errors(report: Any) -> dict[str, str]:
    return {f.code: f.message for f in report.findings if f.severity == Severity.ERROR}


@pytest.mark.parametrize("method", ["standard", "block"])
def test_the_standard_and_block_rejection_samplers_are_lossless(method):
    report = judged(rejection_sample_method=method)
    assert report.compatible, errors(report)
    assert report.recipe.speculative_config["rejection_sample_method"] == method


@pytest.mark.parametrize(("method", "why"), [("synthetic", "invented rate"), ("fly", "own sampler would reject")])
def test_synthetic_and_fly_rejection_are_refused_as_not_lossless_with_the_reason(method, why):
    said = errors(judged(rejection_sample_method=method))
    assert set(said) == {"gate:lossless-rejection-method"}
    assert f"rejection_sample_method is {method!r}, which is not lossless: " in said["gate:lossless-rejection-method"]
    assert why in said["gate:lossless-rejection-method"]


@pytest.mark.parametrize("key", ["synthetic_acceptance_rates", "synthetic_acceptance_length", "synthetic_acceptance_next"])
def test_any_synthetic_acceptance_key_is_refused_as_not_lossless(key):
    said = errors(judged(1, **{key: 0.5}))
    assert set(said) == {"gate:lossless-synthetic"} and said["gate:lossless-synthetic"].startswith(f"{key} sets an invented")


def test_the_drafts_tensor_parallel_size_must_be_one_or_the_verifiers():
    assert judged(draft_tensor_parallel_size=1).compatible
    assert judged(tensor_parallel_size=4, draft_tensor_parallel_size=4).compatible
    for tp in (2, "1", True, 0):
        said = errors(judged(tensor_parallel_size=4, draft_tensor_parallel_size=tp))
        assert set(said) == {"gate:options-draft-tp"}, said
        assert "vLLM takes 1 or the verifier's tensor-parallel size, 4 here" in said["gate:options-draft-tp"]


def test_parallel_drafting_and_adaptive_verification_are_recorded_in_the_spec_and_the_recipe():
    report = judged(parallel_drafting=True, enable_adaptive_verification=False)
    assert report.compatible, errors(report)
    recorded = next(f for f in report.findings if f.code == "gate:options-recorded")
    assert "parallel_drafting true, enable_adaptive_verification false" in recorded.message
    config = report.recipe.speculative_config
    assert (config["parallel_drafting"], config["enable_adaptive_verification"]) == (True, False)
    assert '"parallel_drafting":true' in report.recipe.serve and '"enable_adaptive_verification":false' in report.recipe.serve
    options: dict[str, object] = {"parallel_drafting": True, "enable_adaptive_verification": False}
    spec = RunSpec(1, 1, ModelRef("org/verifier", "a" * 40), ModelRef("org/draft", "b" * 40), "eagle3", 3, "vllm", "cpu",
                   options=options)  # fmt: skip
    assert spec_of(spec.as_dict(), run_id=1, attempt=1).options == options  # as a stored spec and a certificate hold it
    assert set(errors(judged(parallel_drafting="yes"))) == {"gate:options-bad-value"}


def test_dynamic_k_is_written_in_the_form_each_build_takes():
    ranges = [schedule.Range(1, 3, 4), schedule.Range(4, schedule.MAX_BATCH, 1)]
    config = {"method": "eagle3", "num_speculative_tokens": 3}
    pinned = schedule.speculative_config(config, ranges)["num_speculative_tokens_per_batch_size"]
    assert pinned == [[1, 3, 4], [4, schedule.MAX_BATCH, 1]]
    older = schedule.speculative_config(config, ranges, build="0.23.1+cpu")["num_speculative_tokens_per_batch_size"]
    assert older == {"1-3": 4, f"4-{schedule.MAX_BATCH}": 1}
    assert schedule.speculative_config(config, ranges, build="")["num_speculative_tokens_per_batch_size"] == pinned
    assert dynamic_k_takes_ranges(VLLM_VERSION)  # tests/kernel/formats/test_vllm_support.py holds it to the installed vLLM
