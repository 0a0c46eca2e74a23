"""Many worker nodes: the verifier-alone baseline measured by one worker is reused by another, through the
shared store (Redis), though each has its own local directories, as workers on two machines would."""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction

from registry.models import CertificationRun
from registry.runs.demo import demo_catalog_load
from registry.runs.services import run_create
from registry.states import RunState
from tests.support.processes import ROOT, certifying_worker_env, process_env, start_worker, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine]
STAGES = "tests.support.stages.real_stages_through_the_baseline"


def shared_store() -> str:
    """A Redis database of the broker's server that this session alone uses."""
    return str(settings.CELERY_BROKER_URL).rsplit("/", 1)[0] + "/5"


def finished(run: CertificationRun) -> bool:
    run.refresh_from_db()
    return run.is_final


def test_a_baseline_measured_on_one_worker_node_is_reused_on_another(local_hub, tmp_path):
    pairs = {p.draft.repo_id.split("/")[1]: p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models") if p.draft}
    store = {"SPECHUB_BASELINE_STORE": shared_store(), "SPECHUB_DIRECTOR_STAGES": STAGES}
    subprocess.run([sys.executable, "-c", f"import redis; redis.Redis.from_url({shared_store()!r}).flushdb()"], check=True)
    runs = []
    for node, draft in (("a", "llama-draft-1l"), ("b", "eagle3-head")):  # two drafts of one verifier, one per node
        local = tmp_path / node
        local.mkdir()
        worker = start_worker("worker-cpu", local, **certifying_worker_env(local_hub.endpoint, local), **store)
        try:
            with transaction.atomic():
                run = run_create(pair=pairs[draft], hardware="cpu")
            wait_until(partial(finished, run), 600, f"the run on node {node}")
        finally:
            worker.stop()
        assert run.state == RunState.FINISHED, (run.error_code, run.error_message, worker.output()[-3000:])
        runs.append(run)
    results: list[Any] = [run.result for run in runs]
    first, second = (result["stages"]["baseline"]["cache"] for result in results)
    assert (first["hit"], second["hit"]) == (False, True) and first["key"] == second["key"]
    assert not any((tmp_path / "b" / "baselines").glob("*.json"))  # node b read it from the store, not from disk
    kept = subprocess.run([sys.executable, "-c", f"import redis; print(redis.Redis.from_url({shared_store()!r}).dbsize())"],
                          env=process_env(), capture_output=True, text=True, check=True)  # fmt: skip
    assert kept.stdout.strip() == "1"
