"""The gate's table of what vLLM serves, and its config parsing, checked against the installed vLLM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest

from kernel.formats import describe_draft, judge, speculative_config
from kernel.formats.vllm_support import (
    CAUSAL_LM_ARCHITECTURES,
    EAGLE1_ARCHITECTURES,
    EAGLE3_ARCHITECTURES,
    EAGLE_WRAPPER_METHODS,
    METHODS,
    SPECULATORS_METHOD,
    SPECULATORS_TYPES,
    UNSERVED_METHODS,
    VLLM_VERSION,
)
from tests.kernel.formats.configs import EAGLE3_LLAMA, edited, gate_input, mapping
from tests.support.processes import ROOT

ZOO = ROOT / "zoo" / "models" / "spechub-toy"


def flattened(literal: Any) -> set[str]:
    found: set[str] = set()
    for arg in get_args(literal):
        found |= flattened(arg) if get_args(arg) else {arg}
    return found


def test_the_pinned_version_is_the_installed_one():
    import vllm

    assert vllm.__version__.startswith(VLLM_VERSION)


def test_the_speculators_types_are_exactly_vllms():
    from vllm.transformers_utils.configs.speculators.algos import SUPPORTED_SPECULATORS_TYPES

    assert set(SUPPORTED_SPECULATORS_TYPES) == SPECULATORS_TYPES == set(SPECULATORS_METHOD)


def test_every_method_and_architecture_the_gate_accepts_exists_in_vllm():
    from vllm.config.speculative import SpeculativeMethod
    from vllm.model_executor.models import ModelRegistry

    assert flattened(SpeculativeMethod) >= METHODS
    registered = set(ModelRegistry.get_supported_archs())
    assert registered >= CAUSAL_LM_ARCHITECTURES
    from vllm.model_executor.models.registry import _SPECULATIVE_DECODING_MODELS

    assert all("eagle3" in _SPECULATIVE_DECODING_MODELS[a][0] for a in EAGLE3_ARCHITECTURES)  # the raw format's heads
    # An EAGLE-1 head on X is built as Eagle{X}: the gate's table is exactly the plain architectures that have one.
    built = {f"Eagle{a}" for a in CAUSAL_LM_ARCHITECTURES if not a.startswith("Eagle")}
    assert {a for a in built if a in _SPECULATIVE_DECODING_MODELS} == EAGLE1_ARCHITECTURES
    assert "MLPSpeculatorPreTrainedModel" not in registered  # why mlp_speculator is in UNSERVED_METHODS
    assert {"mlp_speculator"} == UNSERVED_METHODS


def test_the_methods_the_legacy_eagle_wrapper_takes_are_vllms():
    from vllm.transformers_utils.configs.eagle import EAGLEConfig

    model = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "vocab_size": 128}
    for method in EAGLE_WRAPPER_METHODS:
        EAGLEConfig(model=model, method=method)
    with pytest.raises(ValueError, match="Invalid method medusa"):
        EAGLEConfig(model=model, method="medusa")


@pytest.mark.parametrize("algorithm", sorted(SPECULATORS_TYPES))
def test_the_recipe_matches_the_config_vllm_derives_from_a_speculators_repo(algorithm):
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig

    config = edited(EAGLE3_LLAMA, speculators_model_type=algorithm)
    derived = SpeculatorsConfig.extract_vllm_speculative_config(config)
    fmt = describe_draft(config)
    ours = speculative_config(method=fmt.method or "", k=5, fmt=fmt, draft_model=None)
    ours.pop("model")
    assert ours == derived


@pytest.mark.parametrize("name", ["eagle3-head", "eagle3-head-reduced"])
def test_vllm_reads_the_zoo_heads_as_the_gate_does(name):
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig

    config = json.loads((ZOO / name / "config.json").read_text())
    fmt = describe_draft(config)
    assert SpeculatorsConfig.extract_vllm_speculative_config(config) == {
        "method": fmt.method,
        "num_speculative_tokens": fmt.speculative_tokens,
    }
    layer = SpeculatorsConfig.extract_transformers_pre_trained_config(json.loads(json.dumps(config)))
    assert layer["draft_vocab_size"] == fmt.draft_vocab_size
    assert layer["eagle_aux_hidden_state_layer_ids"] == list(fmt.aux_layer_ids or ())


@pytest.mark.parametrize(
    "broken",
    [
        {"speculators_config__proposal_methods": []},
        {"speculators_config__proposal_methods__0__speculative_tokens": None},
        {"speculators_config__verifier__name_or_path": None},
        {"speculators_model_type": None},
        {"transformer_layer_config": None},
        {"transformer_layer_config": "llama"},
    ],
    ids=["no-proposals", "no-speculative-tokens", "no-verifier-name", "no-type", "no-layer-config", "layer-config-string"],
)
def test_configs_vllm_refuses_are_refused_by_the_gate(broken):
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig

    config = edited(EAGLE3_LLAMA, **broken)
    with pytest.raises((ValueError, TypeError)):
        SpeculatorsConfig.validate_speculators_config(config)
    report = judge(gate_input(config, tensors=mapping(32000, 128256)))
    assert "gate:format-missing-key" in {f.code for f in report.errors} or "gate:format-bad-value" in {
        f.code for f in report.errors
    }


def test_the_speculative_keys_the_gate_judges_are_the_installed_vllms():
    """Its rejection samplers are each judged lossless or not, and its Dynamic SD schedule is written as it reads it."""
    from vllm.config.speculative import RejectionSampleMethod, SpeculativeConfig

    from kernel.formats.options import LOSSLESS_REJECTION, LOSSY_REJECTION, RECORDED
    from kernel.formats.vllm_support import dynamic_k_takes_ranges

    assert flattened(RejectionSampleMethod) <= {*LOSSLESS_REJECTION, *LOSSY_REJECTION}
    fields = SpeculativeConfig.__dataclass_fields__
    assert {*RECORDED, "draft_tensor_parallel_size", "synthetic_acceptance_rates", "synthetic_acceptance_length"} <= set(fields)
    schedule = str(fields["num_speculative_tokens_per_batch_size"].type)
    assert dynamic_k_takes_ranges(VLLM_VERSION) is schedule.startswith("list[")


def test_the_family_tables_are_vllms():
    """Every family architecture is registered; the EAGLE-3 verifiers implement SupportsEagle3 (read from the source
    where the CPU install cannot import the class, and there the import fails in the words the gate quotes)."""
    import inspect

    from vllm.config import speculative
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.interfaces import supports_eagle3
    from vllm.model_executor.models.registry import _MULTIMODAL_MODELS, _TEXT_GENERATION_MODELS

    from kernel.formats.vllm_support import (
        EAGLE3_VERIFIER_ARCHITECTURES,
        FAMILIES,
        GEMMA4_ASSISTANT_TYPES,
        UNLOADABLE_ON_CPU,
    )

    assert set(ModelRegistry.get_supported_archs()) >= set(FAMILIES) | EAGLE3_VERIFIER_ARCHITECTURES
    for architecture in sorted(EAGLE3_VERIFIER_ARCHITECTURES - set(UNLOADABLE_ON_CPU)):
        assert supports_eagle3(ModelRegistry._try_load_model_cls(architecture)), architecture
    assert not supports_eagle3(ModelRegistry._try_load_model_cls("Gemma3ForCausalLM"))
    for architecture, words in UNLOADABLE_ON_CPU.items():
        module, name = {**_TEXT_GENERATION_MODELS, **_MULTIMODAL_MODELS}[architecture]
        source = (Path(inspect.getfile(ModelRegistry.__class__)).parent / f"{module}.py").read_text()
        declared = source[source.index(f"class {name}(") :].split(":", 1)[0]
        assert "SupportsEagle3" in declared
        assert ModelRegistry._try_load_model_cls(architecture) is None
        with pytest.raises(ModuleNotFoundError, match="torchvision"):
            __import__("transformers.models.gemma4.processing_gemma4")
        assert "Gemma4Processor" in words
    assert all(f'"{t}"' in inspect.getsource(speculative) for t in GEMMA4_ASSISTANT_TYPES)
