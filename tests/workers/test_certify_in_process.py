"""`certify` executed in this process with `apply()`, its director stages injected by the tests."""

from __future__ import annotations

import pytest
from django.test import override_settings

from registry.models import WorkloadResult
from registry.runs import services as runs
from registry.states import RunState
from registry.tasks.certify import certify
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db(transaction=True)
STAGES = "tests.support.stages."


def certify_with(stages: str, **run_fields):
    run = RunFactory.create(**run_fields)
    with override_settings(SPECHUB_DIRECTOR_STAGES=STAGES + stages, SPECHUB_RETRY_BACKOFF_SECONDS=0):
        outcome = certify.apply(args=(run.pk,))
    run.refresh_from_db()
    return run, outcome


def test_with_injected_stages_the_run_reaches_finished_with_its_results():
    run, outcome = certify_with("injected_quick_stages")
    assert outcome.result == "finished"
    assert (run.state, run.attempts, run.progress) == (RunState.FINISHED, 1, 100)
    assert set(run.result["stages"]) == {"fetch", "gate", "baseline", "verdict"}
    assert WorkloadResult.objects.get(run=run).acceptance_rate == 0.625


def test_a_user_error_from_an_injected_gate_fails_the_run_once():
    run, _ = certify_with("injected_stages_refusing_at_gate")
    assert (run.state, run.attempts, run.error_code) == (RunState.FAILED_USER, 1, "run:invalid-spec")
    assert "injected gate refuses" in run.error_message
    assert not WorkloadResult.objects.filter(run=run).exists()


def test_an_infra_error_from_an_injected_stage_retries_until_attempts_are_spent():
    run, _ = certify_with("injected_stages_failing_infra", max_attempts=3)
    assert (run.state, run.attempts, run.error_code) == (RunState.FAILED_INFRA, 3, "worker:crashed")


def test_an_unexpected_exception_is_classified_as_an_infra_crash():
    run, _ = certify_with("injected_stages_crashing", max_attempts=1)
    assert (run.state, run.error_code) == (RunState.FAILED_INFRA, "worker:crashed")
    assert "ZeroDivisionError" in run.error_message


def test_a_run_cancelled_while_running_stays_cancelled_without_results():
    run, outcome = certify_with("injected_stages_cancelled_midway")
    assert outcome.result == "superseded"
    assert run.state == RunState.CANCELLED
    assert not WorkloadResult.objects.filter(run=run).exists()


def test_the_default_stages_fail_a_pair_the_hub_does_not_have_as_the_users_fault(local_hub):
    run = RunFactory.create()  # its repos exist only in the database
    certify.apply(args=(run.pk,))
    run.refresh_from_db()
    assert (run.state, run.attempts) == (RunState.FAILED_USER, 1)
    assert run.error_code in ("hub:not-found", "hub:file-not-found"), run.error_message
    assert not run.results.exists()


def test_certifying_a_finished_run_again_changes_nothing():
    run, _ = certify_with("injected_quick_stages")
    with override_settings(SPECHUB_DIRECTOR_STAGES=STAGES + "injected_quick_stages"):
        assert certify.apply(args=(run.pk,)).result == "already-final"
    assert WorkloadResult.objects.filter(run=run).count() == 1


def test_a_delivery_while_another_worker_holds_the_run_leaves_it_alone():
    run = RunFactory.create()
    runs.run_claim(run_id=run.pk, worker="holder")
    with override_settings(SPECHUB_DIRECTOR_STAGES=STAGES + "injected_quick_stages"):
        assert certify.apply(args=(run.pk,)).result == "busy"
    run.refresh_from_db()
    assert (run.state, run.attempts, run.claimed_by) == (RunState.FETCHING, 1, "holder")
