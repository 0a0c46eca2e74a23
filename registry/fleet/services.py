"""Writes for self-hosted workers (issue 41): registration, claims as leases, uploads held to the claim, revocation.

A worker holds no database, broker or signing secret: it calls /api/v1/workers/ with its own credential, and every
rule is here. A claim is a lease on the run's existing attempt machinery (registry/runs/services.py): a worker that
stops beating loses the run to `runs_requeue_stale`, exactly as a hosted Celery worker does (R1). The certificate is
signed by the registry (run_finish publishes it) after the upload has passed its checks.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from kernel import evidence as hardware_evidence
from kernel import qualification as q
from kernel import result
from kernel.errors import ERRORS, InfraError, RunError
from kernel.spec import RunSpec
from kernel.traffic import StoredRequest
from registry.accounts.services import user_lock
from registry.celery import hardware_queues
from registry.deployments.services import token_digest
from registry.dispatch import task_send_on_commit
from registry.fleet.selectors import claim_labels, qualified_labels
from registry.models import CertificationRun, EngineQualification, RegistrationToken, Worker, WorkerAction, WorkerEvent
from registry.params import echo
from registry.runs.qualifications import qualification_record
from registry.runs.selectors import run_spec
from registry.runs.services import (
    RunBusy,
    RunNotActive,
    awaiting_signature,
    run_claim,
    run_dispatch,
    run_fail,
    run_finish,
    run_heartbeat,
    run_keep_upload,
    run_mark_stale,
    run_progress,
)
from registry.states import ACTIVE_STATES, RunState

REGISTRATION_PREFIX, WORKER_PREFIX = "shr_", "shw_"  # the formats' prefixes, not secrets
REGISTRATION_LIFETIME = timedelta(hours=1)
MAX_EVIDENCE_BYTES = 16_384
MAX_LABELS = 8


class FleetRefused(Exception):
    """A worker's request the registry will not carry out; the message says why and what to do."""


class RecordRefused(FleetRefused):
    """A document that does not read as one (a result, a qualification record), or a record not this worker's (a
    400); the message names the field."""


class AlreadyQualified(FleetRefused):
    """A second record for what the worker has qualified already (a 409)."""


class OverLimit(FleetRefused):
    """A registration token or a worker past the owner's limit (a 403 naming the setting)."""


class OwnerDeactivated(FleetRefused):
    """A credential or token of a deactivated account: it stopped with the account (a 401)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"The account that owns this {what} is deactivated: its workers, tokens and leases stopped with "
                         "it. Ask the registry's staff to reactivate the account; nothing else brings them back.")  # fmt: skip


def valid_labels(labels: object) -> list[str]:
    """Hardware classes, as the registry's queues name them (`cpu`, `gpu.h100`), or FleetRefused saying what is wrong."""
    if not isinstance(labels, list) or not labels or len(labels) > MAX_LABELS:
        raise FleetRefused(f'labels must be a list of 1 to {MAX_LABELS} hardware classes, e.g. ["gpu.h100"].')
    known = hardware_queues()
    bad = [echo(str(label)) for label in labels if label not in known]
    if bad:
        raise FleetRefused(f"labels {', '.join(bad)} are not hardware classes here: use some of {', '.join(known)}.")
    return sorted(set(labels))


def _audit(worker: Worker, action: WorkerAction, run: CertificationRun | None = None, detail: str = "") -> None:
    WorkerEvent.objects.create(worker=worker, action=action, run=run, detail=detail[:2000])


def registration_token_create(*, owner: Any, labels: object, ephemeral: bool = False) -> tuple[RegistrationToken, str]:
    """A token for one machine to register with, within the hour; the secret is returned this once, never stored."""
    secret = REGISTRATION_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        user_lock(owner)  # two requests at once count each other's tokens
        _within_token_limit(owner)
        token = RegistrationToken.objects.create(
            owner=owner, token_hash=token_digest(secret), labels=valid_labels(labels), ephemeral=ephemeral,
            expires_at=timezone.now() + REGISTRATION_LIFETIME,
        )  # fmt: skip
    return token, secret


def _within_token_limit(owner: Any) -> None:
    limit = settings.SPECHUB_REGISTRATION_TOKENS_PER_USER
    open_tokens = RegistrationToken.objects.filter(owner=owner, used_at__isnull=True, expires_at__gt=timezone.now())
    if open_tokens.count() >= limit:
        raise OverLimit(f"You have {limit} unused registration tokens, the limit per user (SPECHUB_REGISTRATION_TOKENS_"
                        "PER_USER): use one, or wait for one to expire an hour after it was made, then make one.")  # fmt: skip


def _within_worker_limit(owner: Any) -> None:
    limit = settings.SPECHUB_WORKERS_PER_USER
    if Worker.objects.filter(owner=owner, revoked_at__isnull=True).count() >= limit:
        raise OverLimit(f"You have {limit} workers, the limit per user (SPECHUB_WORKERS_PER_USER): revoke one you no "
                        "longer use on your workers page, then register this machine with the same token.")  # fmt: skip


def worker_register(*, secret: str, name: str, engine_build: str, evidence: Mapping[str, Any]) -> tuple[Worker, str]:
    """Trade a registration token, once and within its hour, for the worker's own credential (returned this once)."""
    if len(json.dumps(evidence)) > MAX_EVIDENCE_BYTES:
        raise ValidationError(f"The hardware evidence is over {MAX_EVIDENCE_BYTES:,} bytes: send the devices' names and memory.")
    try:  # the run pages show it for good: read it now, as they will
        shown = hardware_evidence.readable(evidence)
    except hardware_evidence.UnreadableEvidence as unreadable:
        raise ValidationError(f"The hardware evidence does not read: {unreadable}.") from None
    with transaction.atomic():
        token = RegistrationToken.objects.select_for_update().filter(token_hash=token_digest(secret)).first()
        if token is None or token.used_at is not None or token.expires_at <= timezone.now():
            why = "was used already" if token and token.used_at else "has expired" if token else "is not one of ours"
            raise FleetRefused(f"The registration token {why}: make a new one on your workers page (one hour, one use).")
        if not token.owner.is_active:
            raise OwnerDeactivated("registration token")
        user_lock(token.owner)  # two registrations at once count each other's workers
        _within_worker_limit(token.owner)
        token.used_at = timezone.now()
        token.save(update_fields=["used_at"])
        credential = WORKER_PREFIX + secrets.token_urlsafe(32)
        worker = Worker.objects.create(
            owner=token.owner, name=name, labels=token.labels, engine_build=engine_build, ephemeral=token.ephemeral,
            token_hash=token_digest(credential), token_hint=credential[:10], hardware_evidence=shown,
        )  # fmt: skip
        _audit(worker, WorkerAction.REGISTERED, detail=f"labels {', '.join(worker.labels)}; engine build {engine_build}")
    return worker, credential


def worker_authenticated(*, secret: str) -> Worker | None:
    """The worker a credential names, unless revoked; its last call is remembered. OwnerDeactivated for a worker of a
    deactivated account, which is not seen: it neither claims nor keeps its owner's runs for own machines waiting."""
    worker = Worker.objects.select_related("owner").filter(token_hash=token_digest(secret), revoked_at__isnull=True).first()
    if worker is not None and not worker.owner.is_active:
        raise OwnerDeactivated("worker")
    if worker is not None:
        Worker.objects.filter(pk=worker.pk).update(last_seen_at=timezone.now())
    return worker


def worker_qualify(*, worker: Worker, document: Mapping[str, Any]) -> EngineQualification:
    """Store the qualification the worker ran on itself (its controls, on its engine build, on one of its labels): its
    record judges that worker's runs. A record already stored (the hosted pool's, another worker's) is not this
    machine's, and is refused."""
    try:  # every field of its type: the engines pages, the API and the verdicts that cite it read it for good
        record = q.readable(document)
    except q.UnreadableQualification as unreadable:
        raise RecordRefused(f"Refused qualification: {unreadable}.") from None
    if wrong := _not_this_workers(record, worker):
        raise RecordRefused(f"The qualification is not this worker's: {'; '.join(wrong)}. Run the controls here.")
    if EngineQualification.objects.filter(digest=record["digest"]).exclude(worker=worker).exists():
        raise RecordRefused("This qualification record is stored already, from another machine: run the controls here.")
    if record["hardware"] in qualified_labels(worker):
        raise AlreadyQualified(f"This worker qualified {worker.engine_build} on {record['hardware']} already.")
    with transaction.atomic():
        row = qualification_record(document=record, worker=worker, rejudge=False)
        outcome = "passes" if row.passed else f"fails {', '.join(row.failing)}"
        _audit(worker, WorkerAction.QUALIFIED, detail=f"{row.engine_build} on {row.hardware}: {outcome} ({row.digest[:12]})")
        # Judging the worker's finished runs again re-signs their certificates: a task, where the signing key is.
        task_send_on_commit("registry.rejudge_with_qualification", row.pk)
    return row


def _not_this_workers(record: q.Record, worker: Worker) -> list[str]:
    """What in a qualification record differs from the worker it was sent by."""
    wrong = []
    if record["engine"] != settings.SPECHUB_DEFAULT_ENGINE:
        wrong.append(f"engine {echo(str(record['engine']))} (the registry certifies on {settings.SPECHUB_DEFAULT_ENGINE})")
    if record["engine_build"] != worker.engine_build:
        wrong.append(f"engine build {echo(record['engine_build'])} (this worker's: {worker.engine_build})")
    if record["dtype"] != settings.SPECHUB_ENGINE_DTYPE:
        wrong.append(f"dtype {echo(record['dtype'])} (the registry certifies {settings.SPECHUB_ENGINE_DTYPE})")
    if record["hardware"] not in worker.labels:
        wrong.append(f"hardware {echo(record['hardware'])} (this worker's labels: {', '.join(worker.labels)})")
    if record["tv"] != settings.SPECHUB_QUALIFY_TV:
        wrong.append(f"controls sized for TV {echo(str(record['tv']))} (the registry's: {settings.SPECHUB_QUALIFY_TV})")
    ran = {control["name"]: control["outcome"] for control in record["controls"]}
    if missing := [name for name in settings.SPECHUB_QUALIFY_CONTROLS if name not in ran]:
        wrong.append(f"controls {', '.join(missing)} not run")
    if odd := [echo(str(outcome)) for outcome in ran.values() if outcome not in q.OUTCOMES]:
        wrong.append(f"outcomes {', '.join(odd)} are not a control's")
    return wrong


def claimable(worker: Worker, labels: list[str]) -> Q:
    """The runs a worker may take: queued, on `labels` (those it may claim on), on its owner's own workloads (their
    traffic, and their deployments' re-certifications on it); runs on the public suite, which publish to the listing,
    only once staff approved the worker for them."""
    owned = Q(workload__owner=worker.owner)  # private: the run's certificate lists nothing public
    scope = owned | Q(workload__isnull=True) if worker.public_approved else owned
    return Q(state=RunState.QUEUED, hardware__in=labels) & scope


def worker_claim(*, worker: Worker) -> RunSpec | None:
    """Lease the next run the worker may take (SKIP LOCKED: two workers never wait on, or take, the same row)."""
    labels = claim_labels(worker)
    if not labels:
        raise FleetRefused(f"Engine build {worker.engine_build} has no qualification from this machine: run "
                           "`python -m workers serve` again, which runs the controls and sends them first.")  # fmt: skip
    with transaction.atomic():
        candidates = CertificationRun.objects.filter(claimable(worker, labels)).order_by("-priority", "created_at", "id")
        run = candidates.select_for_update(skip_locked=True, of=("self",)).first()
        if run is None:
            return None
        try:
            spec = run_claim(run_id=run.pk, worker=worker.identity, self_hosted=True)
        except RunBusy:
            return None
        if spec is None:
            return None
        CertificationRun.objects.filter(pk=run.pk).update(worker=worker)
        _audit(worker, WorkerAction.CLAIMED, run, f"attempt {spec.attempt} on {run.hardware}")
    return spec


def _held(worker: Worker, run_id: int, attempt: int) -> CertificationRun:
    held = {"worker": worker, "claimed_by": worker.identity, "attempts": attempt, "state__in": ACTIVE_STATES}
    run = CertificationRun.objects.filter(pk=run_id, **held).first()
    if run is None:
        raise FleetRefused(f"This worker does not hold run {run_id} at attempt {attempt}: claim a run before reporting on it.")
    return run


def worker_heartbeat(*, worker: Worker, run_id: int, attempt: int) -> None:
    _held(worker, run_id, attempt)
    if not run_heartbeat(run_id=run_id, attempt=attempt):
        raise FleetRefused(f"Run {run_id} is no longer held at attempt {attempt}: drop it and claim again.")


def worker_progress(*, worker: Worker, run_id: int, attempt: int, stage: str, percent: int) -> None:
    _held(worker, run_id, attempt)
    try:
        run_progress(run_id=run_id, attempt=attempt, stage=stage, percent=percent)
    except RunNotActive:
        raise FleetRefused(f"Run {run_id} is no longer held at attempt {attempt}: drop it and claim again.") from None


def worker_workload(*, worker: Worker, run_id: int, attempt: int) -> tuple[str, list[StoredRequest]] | None:
    """The held run's workload sample (its hash and requests), which the worker keeps only while it measures; None
    for a run on the public suite."""
    run = _held(worker, run_id, attempt)
    workload = run.workload
    if workload is None:
        return None
    if workload.deleted_at is not None:
        raise FleetRefused(f"The workload of run {run_id} was deleted: fail the run with workload:invalid.")
    return workload.sha256, list(workload.sample)


def _checked(worker: Worker, run: CertificationRun, document: Mapping[str, Any]) -> result.ResultDocument:
    """The document to store: read as every page and endpoint will read it, whole, each figure held to what it means
    for the k the run was claimed with (a 400 naming the field), with the labels the registry works out from its
    figures; the spec claimed (and so the pinned revisions), and the engine build the worker registered with."""
    claimed = run_spec(run=run)
    try:
        readable = result.readable(document, k=claimed.num_speculative_tokens)
    except result.UnreadableResult as unreadable:
        raise RecordRefused(f"{unreadable} Upload the document as the worker's director wrote it: kernel/result/schema.py "
                            "types each field, and kernel/result/figures.py says what each figure may be.") from None  # fmt: skip
    if document.get("spec") != json.loads(json.dumps(claimed.as_dict())):  # as JSON holds it: tuples as lists
        raise FleetRefused(f"The document's spec is not the one run {run.pk} was claimed with (pair, revisions, plan).")
    if (built := result.engine_build(readable)) != worker.engine_build:
        raise FleetRefused(f"The document names engine build {built!r}; this worker registered {worker.engine_build!r}.")
    return readable


def worker_upload(*, worker: Worker, run_id: int, attempt: int, document: Mapping[str, Any]) -> CertificationRun:
    """Check the held run's result and keep it for signing. The web tier holds only the public key: a process that
    holds the signing key finishes the run (upload_finish, sent as a task). The same upload again (a retry after the
    answer was lost) changes nothing: one result is stored."""
    sha256 = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
    stored = WorkerEvent.objects.filter(worker=worker, run_id=run_id, action=WorkerAction.UPLOADED, document_sha256=sha256)
    if stored.exists():
        return CertificationRun.objects.get(pk=run_id)
    run = _held(worker, run_id, attempt)
    try:
        readable = _checked(worker, run, document)
    except FleetRefused as refused:
        _audit(worker, WorkerAction.REFUSED, run, str(refused))
        raise
    with transaction.atomic():
        # The same upload sent several times at once: each waits here for the one before, then finds it stored.
        CertificationRun.objects.select_for_update().filter(pk=run_id).exists()
        if stored.exists():
            return CertificationRun.objects.get(pk=run_id)
        try:
            run_keep_upload(run_id=run_id, attempt=attempt, document=readable)
        except (RunNotActive, RunBusy) as gone:
            raise FleetRefused(f"Run {run_id} takes no upload at attempt {attempt}: {gone}.") from None
        WorkerEvent.objects.create(worker=worker, action=WorkerAction.UPLOADED, run=run, detail=f"attempt {attempt}",
                                   document_sha256=sha256)  # fmt: skip
        task_send_on_commit("registry.finish_upload", run_id, attempt)
    _end_if_ephemeral(worker)
    return CertificationRun.objects.get(pk=run_id)


def upload_finish(*, run_id: int, attempt: int) -> CertificationRun | None:
    """Finish an uploaded run, where the signing key is: judged, stored, signed and published (run_finish). None
    when the run is no longer that attempt's (its lease went stale before a signer took it: it is queued again)."""
    run = CertificationRun.objects.filter(pk=run_id, attempts=attempt, state=RunState.PUBLISHING).first()
    if run is None or run.result is None:
        return None
    try:
        return run_finish(run_id=run_id, attempt=attempt, document=run.result)
    except RunNotActive:
        return None
    except Exception as failed:  # a document the checks let through and the store could not take: measured again
        detail = f"The uploaded document could not be stored ({type(failed).__name__}: {failed!s:.300})."
        run_fail(run_id=run_id, attempt=attempt, error=InfraError("worker:crashed", detail))
        raise


def worker_fail(*, worker: Worker, run_id: int, attempt: int, code: str, detail: str) -> bool:
    """End the held attempt with a fault code of kernel/errors.py; True when the run went back to the queue."""
    if code not in ERRORS:
        raise FleetRefused(f"{code!r} is not a fault code: use one of kernel/errors.py's, e.g. 'engine:start-failed'.")
    run = _held(worker, run_id, attempt)
    retried = run_fail(run_id=run_id, attempt=attempt, error=RunError(code, detail[:2000]))
    _audit(worker, WorkerAction.FAILED, run, f"{code}: {detail[:500]}")
    _end_if_ephemeral(worker)
    return retried


def worker_public_approve(*, worker: Worker, approved: bool, by: Any) -> Worker:
    """Staff let a worker measure the public suite (or stop it), as a maintainer approves an outside pull request
    before it reaches a GPU runner; the owner's log says who and when."""
    if worker.public_approved != approved:
        Worker.objects.filter(pk=worker.pk).update(public_approved=approved)
        worker.public_approved = approved
        verb = "approved for" if approved else "withdrawn from"
        _audit(worker, WorkerAction.APPROVED, detail=f"{verb} the public listing by {getattr(by, 'username', by)}")
    return worker


def _end_if_ephemeral(worker: Worker) -> None:
    if worker.ephemeral:
        worker_revoke(worker=worker, action=WorkerAction.DEREGISTERED, why="ephemeral: one run, then gone")


def worker_revoke(*, worker: Worker, action: WorkerAction = WorkerAction.REVOKED, why: str = "") -> list[int]:
    """End the credential now, and any lease it holds with it: those runs go back to the queue (or fail, out of
    attempts) at once rather than when their heartbeat goes quiet. Returns the runs released."""
    with transaction.atomic():
        Worker.objects.filter(pk=worker.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        released = _leases_release(CertificationRun.objects.filter(worker=worker))
        _audit(worker, action, detail="; ".join(filter(None, [why, f"released runs {released}" if released else ""])))
    return released


def owner_leases_release(*, owner: Any) -> list[int]:
    """Release every lease the workers of `owner`, a deactivated account, hold: those runs go back to the queue (or
    fail, out of attempts) now. Their credentials stop with the account (worker_authenticated), and start again only
    if staff reactivate it, so nothing is revoked here. Returns the runs released."""
    with transaction.atomic():
        return _leases_release(CertificationRun.objects.filter(worker__owner=owner), why="its worker's owner was deactivated")


def _leases_release(runs: QuerySet[CertificationRun], why: str = "") -> list[int]:
    released: list[int] = []
    for run in runs.select_for_update(of=("self",)).filter(state__in=ACTIVE_STATES):
        if awaiting_signature(run):  # its upload is in: the lease is over already
            continue
        run_mark_stale(run=run, why=f"Attempt {run.attempts} was released: {why}." if why else "")
        released.append(run.pk)
        if run.state == RunState.QUEUED:  # as a lost lease is (runs_requeue_stale): the hosted pool hears of it
            transaction.on_commit(partial(run_dispatch, run_id=run.pk))
    return released
