from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.utils import timezone

from kernel.errors import InfraError, UserError
from registry.models import CertificationRun, WorkloadResult
from registry.runs import services as runs
from registry.states import RunState
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db


def claimed_run(**fields):
    run = RunFactory.create(**fields)
    spec = runs.run_claim(run_id=run.pk, worker="test")
    assert spec is not None
    return run, spec


def test_it_refuses_an_illegal_transition_and_names_the_allowed_ones():
    run = RunFactory.create()
    with pytest.raises(runs.InvalidTransition, match=r"cannot go from 'queued' to 'finished'.*fetching"):
        runs.run_transition(run_id=run.pk, to=RunState.FINISHED)
    run.refresh_from_db()
    assert run.state == RunState.QUEUED


def test_a_final_run_refuses_every_transition():
    run = RunFactory.create()
    runs.run_cancel(run_id=run.pk)
    for target in RunState:
        with pytest.raises(runs.InvalidTransition, match="none: it is final"):
            runs.run_transition(run_id=run.pk, to=target)


def test_claiming_a_queued_run_starts_attempt_one_in_fetching():
    run, spec = claimed_run()
    run.refresh_from_db()
    assert (run.state, run.attempts, run.stage, spec.attempt) == (RunState.FETCHING, 1, "fetch", 1)
    assert run.heartbeat_at is not None and run.started_at is not None


def test_claiming_a_final_run_returns_nothing():
    run = RunFactory.create()
    runs.run_cancel(run_id=run.pk)
    assert runs.run_claim(run_id=run.pk, worker="test") is None


def test_claiming_a_run_with_a_fresh_heartbeat_is_refused_as_busy():
    run, _ = claimed_run()
    with pytest.raises(runs.RunBusy):
        runs.run_claim(run_id=run.pk, worker="other")


def test_claiming_a_run_whose_heartbeat_went_quiet_takes_it_over_as_attempt_two():
    run, _ = claimed_run()
    CertificationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    spec = runs.run_claim(run_id=run.pk, worker="other")
    run.refresh_from_db()
    assert spec is not None and spec.attempt == 2
    assert (run.state, run.claimed_by) == (RunState.FETCHING, "other")


def test_progress_moves_the_state_with_the_stage():
    run, _ = claimed_run()
    runs.run_progress(run_id=run.pk, attempt=1, stage="gate", percent=20)
    runs.run_progress(run_id=run.pk, attempt=1, stage="baseline", percent=40)
    run.refresh_from_db()
    assert (run.state, run.stage, run.progress) == (RunState.MEASURING, "baseline", 40)


def test_progress_from_a_superseded_attempt_is_refused():
    run, _ = claimed_run()
    CertificationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    runs.run_claim(run_id=run.pk, worker="other")
    with pytest.raises(runs.RunNotActive):
        runs.run_progress(run_id=run.pk, attempt=1, stage="gate", percent=10)
    assert runs.run_heartbeat(run_id=run.pk, attempt=1) is False
    assert runs.run_heartbeat(run_id=run.pk, attempt=2) is True


def test_finishing_stores_one_result_per_category():
    run, _ = claimed_run()
    runs.run_progress(run_id=run.pk, attempt=1, stage="verdict", percent=90)
    document: Any = {"schema_version": 2, "workloads": {"chat": {"acceptance": {"mean_acceptance_length": 3.2}}, "code": {}}}
    runs.run_finish(run_id=run.pk, attempt=1, document=document)
    run.refresh_from_db()
    assert run.state == RunState.FINISHED and run.finished_at is not None
    assert sorted(WorkloadResult.objects.filter(run=run).values_list("category", flat=True)) == ["chat", "code"]
    assert WorkloadResult.objects.get(run=run, category="chat").mean_acceptance_length == 3.2


def test_a_user_error_fails_the_run_without_retry():
    run, _ = claimed_run()
    retried = runs.run_fail(run_id=run.pk, attempt=1, error=UserError("run:invalid-spec", "k is 0."))
    run.refresh_from_db()
    assert retried is False
    assert (run.state, run.error_code) == (RunState.FAILED_USER, "run:invalid-spec")
    assert "k is 0." in run.error_message and "What to do:" in run.error_message


def test_an_infra_error_requeues_until_attempts_are_spent():
    run, _ = claimed_run(max_attempts=2)
    assert runs.run_fail(run_id=run.pk, attempt=1, error=InfraError("worker:crashed")) is True
    run.refresh_from_db()
    assert run.state == RunState.QUEUED
    runs.run_claim(run_id=run.pk, worker="test")
    assert runs.run_fail(run_id=run.pk, attempt=2, error=InfraError("worker:crashed")) is False
    run.refresh_from_db()
    assert run.state == RunState.FAILED_INFRA
    assert "every attempt" in run.error_message


@override_settings(SPECHUB_STALE_AFTER_SECONDS=60)
def test_the_stale_sweep_requeues_quiet_runs_and_leaves_live_ones():
    quiet, _ = claimed_run()
    live, _ = claimed_run()
    CertificationRun.objects.filter(pk=quiet.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert runs.runs_requeue_stale() == [quiet.pk]
    quiet.refresh_from_db()
    live.refresh_from_db()
    assert (quiet.state, quiet.error_code) == (RunState.QUEUED, "worker:lost")
    assert live.state == RunState.FETCHING


def test_a_stale_run_with_no_attempts_left_fails_as_infra():
    run, _ = claimed_run(max_attempts=1)
    CertificationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert runs.runs_requeue_stale() == []
    run.refresh_from_db()
    assert run.state == RunState.FAILED_INFRA


def test_it_refuses_an_unknown_hardware_class(pair):
    with pytest.raises(ValidationError, match="Unknown hardware class 'tpu'"):
        runs.run_create(pair=pair, hardware="tpu")
    assert not CertificationRun.objects.exists()
