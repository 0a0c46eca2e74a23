"""No run waits forever (issue 52, §3): a run for its owner's own machines only, with none of their workers on its
hardware class seen for SPECHUB_OWN_MACHINES_WAIT_SECONDS, fails with own-machines:no-worker, says why on its page,
and stops counting against the owner's daily runs. Its page says so while it waits."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from registry.models import CertificationRun, Worker
from registry.runs.schedules import runs_fail_unserved, schedules_install
from registry.runs.services import UNSERVED, run_claim, run_fail_unserved
from registry.states import RunState
from registry.tasks.upkeep import fail_unserved_runs
from registry.traffic.services import workload_runs_today
from tests.registry.test_fleet_api import API, post, private_run, registered, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]
HOUR = timedelta(hours=1)


@pytest.fixture
def owner(db: Any) -> User:
    return User.objects.create_user("team", password="pw")


def waiting(owner: User, *, queued_ago: timedelta, worker_seen_ago: timedelta | None) -> CertificationRun:
    """A run for `owner`'s machines only on gpu.h100, queued `queued_ago`, their one worker there last seen
    `worker_seen_ago` (None: it never called, and was revoked since)."""
    _, worker_id = registered(owner, ["gpu.h100"])  # a run for own machines needs one when it is queued
    run = private_run(owner, own_machines=True)
    now = timezone.now()
    CertificationRun.objects.filter(pk=run.pk).update(created_at=now - queued_ago)
    seen = now - worker_seen_ago if worker_seen_ago else None
    revoked = now if worker_seen_ago is None else None
    Worker.objects.filter(pk=worker_id).update(created_at=now - queued_ago, last_seen_at=seen, revoked_at=revoked)
    run.refresh_from_db()
    return run


def test_a_run_no_machine_of_its_owner_came_for_fails_with_the_reason_and_is_refunded(owner, settings):
    settings.SPECHUB_OWN_MACHINES_WAIT_SECONDS = 3600
    run = waiting(owner, queued_ago=2 * HOUR, worker_seen_ago=None)
    assert workload_runs_today(owner=owner) == 1
    assert fail_unserved_runs() == [run.pk] and runs_fail_unserved() == []  # the task beat sends by name; once only
    run.refresh_from_db()
    assert run.state == RunState.FAILED_USER and run.error_code == UNSERVED and run.finished_at
    assert "waited 1 h with none of your workers on gpu.h100" in run.error_message
    assert workload_runs_today(owner=owner) == 0  # no longer counted against the day's runs
    page = signed_in(owner).get(f"/runs/{run.pk}/").content.decode()
    assert UNSERVED in page and "no longer counts against your daily runs" in page
    assert signed_in(owner).get(f"/api/v1/runs/{run.pk}/").json()["error_code"] == UNSERVED


def test_a_worker_that_calls_keeps_the_run_waiting_and_the_page_says_until_when(owner):
    run = waiting(owner, queued_ago=30 * HOUR, worker_seen_ago=2 * HOUR)
    assert runs_fail_unserved() == []
    page = signed_in(owner).get(f"/runs/{run.pk}/").content.decode()
    assert "Waiting for one of your own machines on gpu.h100" in page and "the last of yours there called at" in page
    deadline = timezone.localtime(timezone.now() + 22 * HOUR)
    assert f"If none comes for it by {deadline:%Y-%m-%d}" in page and "on its owner's own machines only" in page
    assert runs_fail_unserved(now=timezone.now() + 23 * HOUR) == [run.pk]  # 24 h after the worker's last call


def test_a_run_claimed_meanwhile_or_measured_by_the_hosted_pool_is_never_failed_by_the_sweep(owner):
    run = waiting(owner, queued_ago=30 * HOUR, worker_seen_ago=None)
    assert run_claim(run_id=run.pk, worker="self-hosted:1:box", self_hosted=True) is not None
    assert not run_fail_unserved(run_id=run.pk, detail="late") and runs_fail_unserved() == []
    hosted = private_run(owner)  # for the hosted pool: it never waits on the owner's machines
    CertificationRun.objects.filter(pk=hosted.pk).update(created_at=timezone.now() - 30 * HOUR)
    assert runs_fail_unserved() == [] and CertificationRun.objects.get(pk=hosted.pk).state == RunState.QUEUED


def test_the_sweep_runs_on_beats_schedule_with_the_others(owner):
    schedules_install()
    assert PeriodicTask.objects.get(task="registry.fail_unserved_runs").enabled
    worker, _ = registered(owner, ["gpu.h100"])
    run = private_run(owner, own_machines=True)
    assert runs_fail_unserved() == []  # just queued, its owner's worker just registered
    assert post(worker, f"{API}/claim/").json()["run"] == run.pk
