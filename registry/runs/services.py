"""Writes for certification runs. Every state change goes through `_move`,
which enforces the state machine in registry.states."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypedDict

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from kernel import result
from kernel.errors import Fault, RunError, UserError
from kernel.spec import RunSpec
from registry.celery import hardware_queues
from registry.certificates.publishing import run_publish
from registry.dispatch import task_send, task_send_on_commit
from registry.fleet.selectors import serves
from registry.models import CertificationRun, Pair, Priority, RunTrigger, Workload, WorkloadResult
from registry.params import echo
from registry.runs.qualifications import document_judge
from registry.runs.selectors import run_spec
from registry.states import ACTIVE_PATH, ACTIVE_STATES, STAGE_STATES, TRANSITIONS, RunState, can_transition

logger = logging.getLogger(__name__)
UNSERVED = "own-machines:no-worker"  # a run for its owner's own machines that none of their workers came for


class InvalidTransition(Exception):
    """A service was asked for a state change the state machine forbids."""

    def __init__(self, run: CertificationRun, target: str) -> None:
        allowed = sorted(str(state) for state in TRANSITIONS[RunState(run.state)]) or ["none: it is final"]
        source = str(run.state)
        super().__init__(f"Run {run.pk} cannot go from {source!r} to {str(target)!r}; from {source!r} it may go to {allowed}.")


class RunBusy(Exception):
    """Another worker holds the run and its heartbeat is fresh."""


class RunNotActive(Exception):
    """The run was cancelled, finished, or taken over by a newer attempt."""


def _locked(run_id: int) -> CertificationRun:
    return CertificationRun.objects.select_for_update().get(pk=run_id)


def _move(run: CertificationRun, target: RunState, **fields: Any) -> None:
    """Apply one guarded transition to a row locked by the caller."""
    if not can_transition(run.state, target):
        raise InvalidTransition(run, target)
    run.state = target
    for name, value in fields.items():
        setattr(run, name, value)
    if target in (RunState.FINISHED, RunState.FAILED_USER, RunState.FAILED_INFRA, RunState.CANCELLED):
        run.finished_at = timezone.now()
    run.save()


def run_transition(*, run_id: int, to: RunState, **fields: Any) -> CertificationRun:
    """Move a run to `to`, or raise InvalidTransition."""
    with transaction.atomic():
        run = _locked(run_id)
        _move(run, to, **fields)
    return run


def run_dispatch(*, run_id: int, countdown: int = 0) -> bool:
    """Send the run to the queue of its hardware class; False when the broker could not take it.

    A failed dispatch leaves `dispatched_at` empty, and the lost-dispatch sweep sends it again. A run for its owner's
    own machines is sent nowhere: their self-hosted workers claim it through the worker API (registry/fleet).
    """
    run = CertificationRun.objects.get(pk=run_id)
    if run.own_machines:
        return True
    try:
        task_send("registry.certify", run_id, queue=run.queue, countdown=countdown, priority=run.priority)
    except (OperationalError, OSError) as exc:
        logger.warning("run %s: the broker did not take its dispatch (%s); the sweep will send it again", run_id, exc)
        return False
    CertificationRun.objects.filter(pk=run_id).update(dispatched_at=timezone.now())
    return True


def run_create(
    *,
    pair: Pair,
    hardware: str,
    engine: str = "",
    trigger: str = RunTrigger.MANUAL,
    requested_by: Any = None,
    priority: int = Priority.NORMAL,
    workload: Workload | None = None,
    own_machines: bool = False,
) -> CertificationRun:
    """Queue a certification of `pair` on `hardware` (on a user's own `workload`, privately; with `own_machines`, on
    the workload owner's self-hosted workers only); dispatched after commit."""
    if hardware not in hardware_queues():
        known = hardware_queues()
        raise ValidationError(f"Unknown hardware class {echo(hardware)}; use one of {known}.", code="unknown-hardware")
    if own_machines and (workload is None or not serves(owner=workload.owner, hardware=hardware)):
        raise ValidationError(f"You have no worker on {hardware} to measure your own runs: attach one on your workers "
                              "page, or let the hosted pool measure it.", code="no-own-worker")  # fmt: skip
    run = CertificationRun.objects.create(
        pair=pair,
        hardware=hardware,
        engine=engine or settings.SPECHUB_DEFAULT_ENGINE,
        trigger=trigger,
        requested_by=requested_by,
        priority=priority,
        workload=workload,
        own_machines=own_machines,
        max_attempts=settings.SPECHUB_RUN_MAX_ATTEMPTS,
    )
    transaction.on_commit(lambda: run_dispatch(run_id=run.pk))
    return run


def run_cancel(*, run_id: int) -> CertificationRun:
    """Cancel a run that has not reached a final state."""
    return run_transition(run_id=run_id, to=RunState.CANCELLED)


def awaiting_signature(run: CertificationRun) -> bool:
    """A self-hosted worker's checked upload, kept until a process holding the signing key finishes it: its lease is
    over, so its heartbeat going quiet loses nothing (registry/fleet)."""
    return run.state == RunState.PUBLISHING and run.worker_id is not None and run.result is not None


def _heartbeat_is_fresh(run: CertificationRun) -> bool:
    quiet_since = timezone.now() - timedelta(seconds=settings.SPECHUB_STALE_AFTER_SECONDS)
    return run.heartbeat_at is not None and run.heartbeat_at > quiet_since


def _requeue(run: CertificationRun) -> None:
    """Send a stale run back to the queue, or fail it once its attempts are spent."""
    if run.attempts >= run.max_attempts:
        error = RunError("worker:attempts-exhausted", f"Attempt {run.attempts} of {run.max_attempts} was lost.")
        _move(run, RunState.FAILED_INFRA, error_code=error.code, error_message=error.message)
    else:  # a self-hosted worker that lost it no longer holds it: the run names whoever measures it next
        _move(run, RunState.QUEUED, worker=None)


def run_mark_stale(*, run: CertificationRun, why: str = "") -> None:
    """Mark a locked, active run whose heartbeat went quiet (or whose lease ended, `why`) as stale, then re-queue it."""
    error = RunError("worker:lost", why or f"Attempt {run.attempts} last beat at {run.heartbeat_at}.")
    _move(run, RunState.STALE, error_code=error.code, error_message=error.message)
    _requeue(run)


def run_fail_unserved(*, run_id: int, detail: str) -> bool:
    """Fail a run for its owner's own machines that is still queued: none of their workers came for it. False when a
    worker claimed it meanwhile, or it ended otherwise."""
    with transaction.atomic():
        run = _locked(run_id)
        if run.state != RunState.QUEUED or not run.own_machines:
            return False
        error = UserError(UNSERVED, detail)
        _move(run, RunState.FAILED_USER, error_code=error.code, error_message=error.message)
    return True


def run_claim(*, run_id: int, worker: str, self_hosted: bool = False) -> RunSpec | None:
    """Start an attempt on the run for `worker` and return its spec; None if the run is over, or is its owner's
    machines' only and `worker` is not one of them.

    A delivery of a run whose worker went quiet takes it over; a delivery while
    the holder's heartbeat is fresh raises RunBusy.
    """
    with transaction.atomic():
        run = _locked(run_id)
        if awaiting_signature(run) or (run.own_machines and not self_hosted):
            return None
        if run.state in ACTIVE_STATES:
            if _heartbeat_is_fresh(run):
                raise RunBusy(f"run {run_id} is held by {run.claimed_by}")
            run_mark_stale(run=run)
        elif run.state == RunState.STALE:
            _requeue(run)
        if run.state != RunState.QUEUED:
            return None
        now = timezone.now()
        _move(
            run,
            RunState.FETCHING,
            attempts=run.attempts + 1,
            heartbeat_at=now,
            started_at=run.started_at or now,
            claimed_by=worker,
            worker=None,  # a self-hosted worker's own claim sets it after this (registry/fleet)
            stage="fetch",
            progress=0,
            error_code="",
            error_message="",
        )
        return run_spec(run=run)


def _locked_attempt(run_id: int, attempt: int) -> CertificationRun:
    run = _locked(run_id)
    if run.state not in ACTIVE_STATES or run.attempts != attempt:
        raise RunNotActive(f"run {run_id} is {run.state} at attempt {run.attempts}, not active at attempt {attempt}")
    return run


def run_progress(*, run_id: int, attempt: int, stage: str, percent: int) -> None:
    """Record the stage and percent of the current attempt, moving its state along."""
    with transaction.atomic():
        run = _locked_attempt(run_id, attempt)
        _advance(run, STAGE_STATES.get(stage, RunState(run.state)))
        fields = {"stage": stage, "progress": percent, "heartbeat_at": timezone.now(), **_stage_timing(run, stage)}
        CertificationRun.objects.filter(pk=run_id).update(**fields)


class _StageTiming(TypedDict, total=False):
    stage_started_at: datetime
    stage_seconds: dict[str, float]  # by stage: the seconds each finished stage took


def _stage_timing(run: CertificationRun, stage: str) -> _StageTiming:
    """When the stage changes, the seconds the one before took, and when this one began."""
    if stage == run.stage and run.stage_started_at:
        return {}
    now, seconds = timezone.now(), dict(run.stage_seconds or {})
    if run.stage and run.stage_started_at:
        seconds[run.stage] = (now - run.stage_started_at).total_seconds()
    return {"stage_started_at": now, "stage_seconds": seconds}


def _advance(run: CertificationRun, target: RunState) -> None:
    """Walk forward along the happy path to `target`; a director may skip a stage, never a state."""
    while ACTIVE_PATH.index(RunState(run.state)) < ACTIVE_PATH.index(target):
        _move(run, ACTIVE_PATH[ACTIVE_PATH.index(RunState(run.state)) + 1])


def run_heartbeat(*, run_id: int, attempt: int) -> bool:
    """Record that the attempt is alive; False when it no longer owns the run."""
    owned = CertificationRun.objects.filter(pk=run_id, attempts=attempt, state__in=ACTIVE_STATES)
    return owned.update(heartbeat_at=timezone.now()) == 1


def run_finish(*, run_id: int, attempt: int, document: result.ResultDocument) -> CertificationRun:
    """Publish the attempt's result document and finish the run, all or nothing.

    The document is read through kernel.result, which refuses a schema version this code cannot read.
    """
    loaded = result.load(document)
    with transaction.atomic():
        run = _locked_attempt(run_id, attempt)
        _advance(run, RunState.PUBLISHING)
        for field, value in _stage_timing(run, "publish").items():
            setattr(run, field, value)
        run.stage, run.heartbeat_at = "publish", timezone.now()
        run.save(update_fields=["stage", "heartbeat_at", "stage_started_at", "stage_seconds"])
    with transaction.atomic():
        run = _locked_attempt(run_id, attempt)
        if loaded is not None:  # judged with the qualification of the build it ran on
            loaded = document_judge(run=run, document=loaded)
        _store_results(run, result.workloads(loaded))
        fields = {"environment": result.environment(loaded), "engine_version": result.engine_build(loaded),
                  "stage_seconds": _stage_timing(run, "finished").get("stage_seconds", run.stage_seconds)}  # fmt: skip
        _move(run, RunState.FINISHED, result=loaded, progress=100, **fields)
        run_publish(run=run)
    return run


def run_keep_upload(*, run_id: int, attempt: int, document: Mapping[str, Any]) -> None:
    """Keep an attempt's uploaded document for a process that can sign: the run waits in PUBLISHING, beating."""
    with transaction.atomic():
        run = _locked_attempt(run_id, attempt)
        if awaiting_signature(run):
            raise RunBusy(f"run {run_id} holds an upload already, waiting to be signed")
        _advance(run, RunState.PUBLISHING)
        fields = {"stage": "publish", "heartbeat_at": timezone.now(), "result": dict(document), **_stage_timing(run, "publish")}
        CertificationRun.objects.filter(pk=run_id).update(**fields)


def _store_results(run: CertificationRun, workloads: dict[str, result.WorkloadFigures]) -> None:
    for category, measured in workloads.items():
        # A partial document (a director given fewer stages) may leave a part out.
        acceptance: Mapping[str, Any] = measured.get("acceptance") or {}
        equivalence: Mapping[str, Any] = measured.get("equivalence") or {}
        throughput: Mapping[str, Any] = measured.get("throughput") or {}
        WorkloadResult.objects.create(
            run=run,
            category=category,
            mean_acceptance_length=acceptance.get("mean_acceptance_length"),
            acceptance_rate=acceptance.get("acceptance_rate"),
            greedy_exact_match=equivalence.get("greedy_exact_match"),
            speedup=throughput.get("speedup"),
            acceptance=acceptance,
            equivalence=equivalence,
            throughput=throughput,
        )


def run_fail(*, run_id: int, attempt: int, error: RunError) -> bool:
    """End the attempt with `error`; return True when the run was re-queued for a retry."""
    with transaction.atomic():
        try:
            run = _locked_attempt(run_id, attempt)
        except RunNotActive:
            return False
        fields = {"error_code": error.code, "error_message": error.message}
        if error.retryable and run.attempts < run.max_attempts:
            _move(run, RunState.QUEUED, **fields)
            return True
        if error.retryable:
            spent = RunError("worker:attempts-exhausted", f"Last error ({error.code}): {error.message}")
            fields = {"error_code": error.code, "error_message": spent.message}
        target = RunState.FAILED_USER if error.fault is Fault.USER else RunState.FAILED_INFRA
        _move(run, target, **fields)
        return False


def runs_requeue_stale(*, now: datetime | None = None) -> list[int]:
    """Mark every active run whose heartbeat went quiet as stale, re-queue and dispatch it."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.SPECHUB_STALE_AFTER_SECONDS)
    requeued: list[int] = []
    candidates = CertificationRun.objects.filter(state__in=ACTIVE_STATES, heartbeat_at__lt=cutoff).values_list("pk", flat=True)
    for run_id in list(candidates):
        with transaction.atomic():
            run = _locked(run_id)
            if run.state not in ACTIVE_STATES or _heartbeat_is_fresh(run):
                continue
            if awaiting_signature(run):  # no signer took it yet: ask again, keep the upload
                run.heartbeat_at = timezone.now()
                run.save(update_fields=["heartbeat_at"])
                task_send_on_commit("registry.finish_upload", run_id, run.attempts)
                continue
            run_mark_stale(run=run)
            if run.state == RunState.QUEUED:
                requeued.append(run_id)
                transaction.on_commit(partial(run_dispatch, run_id=run_id))
    return requeued
