"""The schedules with a real beat (compose's command, database scheduler) and a real worker.

Beat's periodic tasks are installed by the real service with one-second intervals; the
worker certifies with injected stages (tests.support.stages), since what is tested here
is who queues what, and how often.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from kernel.builds import installed_engine_build
from registry.models import CertificationRun, EngineBuild, Priority, RunTrigger
from registry.runs.schedules import schedules_install
from registry.runs.services import run_create
from registry.states import RunState
from tests.services import free_port
from tests.support.factories import PairFactory
from tests.support.processes import Process, compose_command, process_env, start_worker, wait_until, worker_database_url
from tests.support.runs import finish_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


@pytest.fixture
def scheduled(tmp_path):
    """Beat and a CPU worker, with every sweep running each second."""
    with override_settings(SPECHUB_SWEEP_SECONDS=1, SPECHUB_ENGINE_CHECK_SECONDS=1):
        names = schedules_install()
    # stale runs, lost dispatches, unserved own-machines runs, webhooks, emails, Hub PRs, engine changes, expiry, thinning
    assert len(names) == 9
    env = {
        "SPECHUB_DIRECTOR_STAGES": "tests.support.stages.injected_quick_stages",
        "SPECHUB_TEST_MARKERS": str(tmp_path),
        "SPECHUB_HEARTBEAT_SECONDS": "1",
        "SPECHUB_STALE_AFTER_SECONDS": "3",
        "SPECHUB_DISPATCH_GRACE_SECONDS": "0",
    }
    processes: list[Process] = []

    def start() -> None:
        processes.append(start_worker("worker-cpu", tmp_path, **env))
        beat_env = process_env({"DATABASE_URL": worker_database_url(), **env})
        beat = Process([*compose_command("beat"), "--pidfile="], beat_env, tmp_path / f"beat-{uuid.uuid4().hex[:6]}.log")
        processes.append(beat)
        beat.wait_for_output("beat: Starting...", timeout=60)

    yield start
    for process in processes:
        process.stop()


def refreshed(run: CertificationRun) -> CertificationRun:
    run.refresh_from_db()
    return run


def test_a_new_engine_version_on_the_workers_requeues_certified_pairs_at_low_priority_with_injected_stages(scheduled):
    old = [finish_run(PairFactory.create(), version="0.31.0") for _ in range(2)]
    elsewhere = finish_run(PairFactory.create(), version="0.31.0", hardware="gpu.h100")  # no worker reported there
    failed = finish_run(PairFactory.create(), version="0.31.0", verdict="failed")
    current = installed_engine_build("vllm")
    assert current and current != "0.31.0"

    scheduled()
    wait_until(lambda: EngineBuild.objects.filter(hardware="cpu", engine="vllm", version=current).exists(), 30, "the report")
    rerun = CertificationRun.objects.filter(trigger=RunTrigger.ENGINE_CHANGE)
    wait_until(lambda: rerun.filter(state=RunState.FINISHED).count() == 2, 60, "both re-certifications to finish")
    time.sleep(4)  # several more sweeps: none may queue a second run

    assert sorted(rerun.values_list("pair_id", flat=True)) == sorted(run.pair_id for run in old)
    assert set(rerun.values_list("priority", "engine_version")) == {(Priority.LOW, current)}
    assert not elsewhere.pair.runs.exclude(pk=elsewhere.pk).exists()
    assert not failed.pair.runs.exclude(pk=failed.pk).exists()


def test_a_run_whose_worker_went_quiet_is_requeued_by_beat_and_finishes_once_with_injected_stages(scheduled, tmp_path):
    quiet_since = timezone.now() - timedelta(minutes=10)
    run = CertificationRun.objects.create(
        pair=PairFactory.create(), engine="vllm", hardware="cpu", state=RunState.MEASURING, attempts=1,
        heartbeat_at=quiet_since, started_at=quiet_since, dispatched_at=quiet_since, claimed_by="lost-worker:1",
    )  # fmt: skip

    scheduled()
    wait_until(lambda: refreshed(run).state == RunState.FINISHED, 60, "the stale run to finish")
    time.sleep(4)

    run = refreshed(run)
    assert (run.state, run.attempts) == (RunState.FINISHED, 2)
    assert run.claimed_by.startswith("worker-cpu-")
    log = (tmp_path / f"{run.pk}.log").read_text()
    assert log.count("end verdict") == 1 and "attempt=2" in log and "attempt=3" not in log
    assert run.results.count() == 1 and run.certificate.verdict == "certified"


def test_a_run_whose_dispatch_was_lost_is_sent_by_beat_and_finishes_with_injected_stages(scheduled, tmp_path):
    # What a submission leaves behind when the broker was down as it was made.
    run = CertificationRun.objects.create(pair=PairFactory.create(), engine="vllm", hardware="cpu")
    assert run.dispatched_at is None and run.state == RunState.QUEUED

    scheduled()
    wait_until(lambda: refreshed(run).state == RunState.FINISHED, 60, "the lost run to finish")
    time.sleep(3)

    run = refreshed(run)
    assert run.attempts == 1 and run.dispatched_at is not None
    assert (tmp_path / f"{run.pk}.log").read_text().count("end verdict") == 1


@pytest.fixture
def broker_down():
    """Point this process's Celery producer at a loopback port where no broker listens."""
    from registry.celery import app

    saved = app.conf.broker_write_url
    app.conf["broker_write_url"] = f"redis://127.0.0.1:{free_port()}/0"
    _drop_pools(app)
    yield
    app.conf["broker_write_url"] = saved
    _drop_pools(app)


def _drop_pools(app) -> None:
    # Forget the cached pools (kombu keeps one per broker URL) so the next publish uses the current URL.
    app._pool = None
    app.amqp._producer_pool = None


def test_a_submission_made_while_the_broker_is_down_is_kept_for_the_dispatcher(broker_down):
    with transaction.atomic():
        run = run_create(pair=PairFactory.create(), hardware="cpu")
    run = refreshed(run)  # the dispatch after commit failed, and said so in the log, not to the user
    assert run.state == RunState.QUEUED and run.dispatched_at is None


def test_the_broker_serves_a_submission_before_an_earlier_low_priority_recertification_with_injected_stages(tmp_path):
    with transaction.atomic():
        recertification = run_create(pair=PairFactory.create(), hardware="cpu", priority=Priority.LOW)
    with transaction.atomic():
        submission = run_create(pair=PairFactory.create(), hardware="cpu")
    worker = start_worker("worker-cpu", tmp_path, SPECHUB_DIRECTOR_STAGES="tests.support.stages.injected_quick_stages")
    try:
        wait_until(lambda: refreshed(recertification).state == RunState.FINISHED, 60, "both runs to finish")
    finally:
        worker.stop()
    assert refreshed(submission).state == RunState.FINISHED
    assert submission.started_at is not None and recertification.started_at is not None
    assert submission.started_at < recertification.started_at
