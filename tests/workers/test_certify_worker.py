"""`certify` in real Celery worker processes over the real broker.

The workers run docker-compose.yml's worker commands; their director stages
are injected by the tests (tests.support.stages), since measuring arrives
with the certification work.
"""

from __future__ import annotations

import os

import pytest
import redis
from django.conf import settings
from django.db import transaction
from django.test import override_settings

from registry.models import CertificationRun, WorkloadResult
from registry.runs.services import run_create
from registry.states import RunState
from registry.tasks.timelimit import HARD_LIMIT_EXIT_CODE
from tests.support.factories import PairFactory
from tests.support.processes import start_worker, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]
STAGES = "tests.support.stages."


def worker_env(markers, stages: str, **extra: str) -> dict[str, str]:
    return {
        "SPECHUB_DIRECTOR_STAGES": STAGES + stages,
        "SPECHUB_TEST_MARKERS": str(markers),
        "SPECHUB_HEARTBEAT_SECONDS": "1",
        **extra,
    }


def queue_run(hardware: str = "cpu") -> CertificationRun:
    with transaction.atomic():
        run = run_create(pair=PairFactory.create(), hardware=hardware)
    return run


def state_of(run: CertificationRun) -> str:
    run.refresh_from_db()
    return run.state


def unacked_messages() -> int:
    client = redis.Redis.from_url(str(settings.CELERY_BROKER_URL))
    return int(client.hlen(f"{settings.CELERY_BROKER_KEY_PREFIX}unacked"))


def test_a_real_worker_certifies_a_queued_run_to_its_final_state(tmp_path):
    worker = start_worker("worker-cpu", tmp_path, **worker_env(tmp_path, "injected_quick_stages"))
    try:
        run = queue_run()
        wait_until(lambda: state_of(run) == RunState.FINISHED, 60, "the run to finish")
    finally:
        worker.stop()
    assert run.attempts == 1 and run.claimed_by.startswith("worker-cpu-")
    assert WorkloadResult.objects.filter(run=run).count() == 1
    assert (tmp_path / f"{run.pk}.log").read_text().count("end verdict") == 1


def test_a_gpu_run_goes_to_its_gpu_queue_and_not_to_the_cpu_worker(tmp_path):
    env = worker_env(tmp_path, "injected_quick_stages")
    cpu = start_worker("worker-cpu", tmp_path, **env)
    try:
        run = queue_run(hardware="gpu.h100")
        assert not _becomes_active(run, seconds=3), "the cpu worker took a gpu.h100 run"
        gpu = start_worker("worker-gpu", tmp_path, **env)
        try:
            wait_until(lambda: state_of(run) == RunState.FINISHED, 60, "the gpu worker to finish the run")
        finally:
            gpu.stop()
    finally:
        cpu.stop()
    assert run.claimed_by.startswith("worker-gpu-")


def _becomes_active(run: CertificationRun, seconds: float) -> bool:
    try:
        wait_until(lambda: state_of(run) != RunState.QUEUED, seconds, "a claim")
    except AssertionError:
        return False
    return True


def test_a_run_whose_worker_is_killed_is_redelivered_and_finishes_exactly_once(tmp_path):
    # Short timeouts so redelivery happens within the test: the broker restores
    # unacked messages after 5 s, and a run is stale after 3 s of silence.
    env = worker_env(
        tmp_path,
        "injected_stages_hanging_on_first_attempt",
        CELERY_VISIBILITY_TIMEOUT="5",
        CELERY_UNACKED_RESTORE_SECONDS="1",
        SPECHUB_STALE_AFTER_SECONDS="3",
    )
    first = start_worker("worker-cpu", tmp_path, **env)
    run = queue_run()
    try:
        wait_until(lambda: state_of(run) == RunState.MEASURING, 60, "the first attempt to reach measuring")
    finally:
        first.kill()  # SIGKILL: no chance to ack, requeue or clean up
    assert first.popen.returncode == -9
    assert unacked_messages() == 1, "the killed worker's message should wait, unacked, in the broker"
    second = start_worker("worker-cpu", tmp_path, **env)
    try:
        wait_until(lambda: state_of(run) == RunState.FINISHED, 120, "the redelivered run to finish")
        wait_until(lambda: unacked_messages() == 0, 30, "the broker to hold no unacked message")
    finally:
        second.stop()
    markers = (tmp_path / f"{run.pk}.log").read_text()
    assert run.attempts == 2
    assert markers.count("end verdict") == 1 and "end verdict attempt=2" in markers
    assert "end baseline attempt=1" not in markers
    assert WorkloadResult.objects.filter(run=run).count() == 1
    assert str(second.popen.pid) != str(first.popen.pid)
    assert os.path.exists(second.log)


@override_settings(SPECHUB_RUN_MAX_ATTEMPTS=1)
def test_the_soft_time_limit_ends_a_run_on_a_solo_worker(tmp_path):
    env = worker_env(tmp_path, "injected_slow_stages", SPECHUB_TEST_SLOW_SECONDS="60", SPECHUB_RUN_SOFT_TIME_LIMIT="2")
    worker = start_worker("worker-cpu", tmp_path, **env)
    try:
        run = queue_run()
        wait_until(lambda: state_of(run) == RunState.FAILED_INFRA, 30, "the soft limit to fail the run")
    finally:
        worker.stop()
    assert run.error_code == "worker:time-limit"
    assert "end baseline" not in (tmp_path / f"{run.pk}.log").read_text()


@override_settings(SPECHUB_RUN_MAX_ATTEMPTS=1)
def test_the_hard_time_limit_fails_the_run_and_ends_the_worker(tmp_path):
    env = worker_env(
        tmp_path,
        "injected_stages_ignoring_the_soft_limit",
        SPECHUB_RUN_SOFT_TIME_LIMIT="1",
        SPECHUB_RUN_HARD_TIME_LIMIT="4",
    )
    worker = start_worker("worker-cpu", tmp_path, **env)
    try:
        run = queue_run()
        wait_until(lambda: worker.popen.poll() is not None, 30, "the hard limit to end the worker")
    finally:
        worker.stop()
    assert worker.popen.returncode == HARD_LIMIT_EXIT_CODE
    assert (state_of(run), run.error_code) == (RunState.FAILED_INFRA, "worker:time-limit")
    assert "swallowed soft limit" in (tmp_path / f"{run.pk}.log").read_text()
