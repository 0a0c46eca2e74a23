"""Writes for deployments: register one, its ingest token, the observations its watcher pushes, the verdict on
them and a deployment.drift event when it changes, and the thinning of old observations."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from kernel import live
from registry.deployments import selectors
from registry.deployments.selectors import (
    as_snapshot,
    certified_for,
    certified_run,
    latest_snapshot,
    low_window_causes,
    recertification_pending,
    trailing_spans,
)
from registry.models import (
    Certificate,
    CertificationRun,
    Deployment,
    LiveSnapshot,
    Pair,
    RunTrigger,
    Submission,
    SubmissionStatus,
    WebhookEvent,
    Workload,
)
from registry.notifications.payloads import DeploymentEvent
from registry.notifications.services import owner_event_notify
from registry.runs.services import run_create
from registry.runs.submissions import SubmissionQuotaExceeded, within_submission_quota
from registry.traffic.services import workload_certify

RESET_HINT = (
    " If the watcher's clock ran ahead once, reset the deployment's ingest state on its page, or POST "
    "/api/v1/deployments/<id>/ingest/reset/: the snapshots read in the future go, its history stays."
)
TOKEN_PREFIX = "shd_"  # noqa: S105  # the format's prefix, not a secret


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def deployment_create(
    *,
    owner: Any,
    name: str,
    pair: Pair,
    certificate: Certificate | None = None,
    workload: Workload | None = None,
    temperature: float = 0.0,
) -> tuple[Deployment, str]:
    """Register a deployment of `pair`, served at `temperature`, and issue its ingest token, returned here once and
    never again."""
    if certificate is not None and certificate.pair_id != pair.pk:
        raise ValidationError(
            {"certificate": f"Certificate {certificate.pk} is pair {certificate.pair_id}'s, not pair {pair.pk}'s."}
        )
    if workload is not None and (workload.owner_id != owner.pk or workload.verifier_id != pair.verifier_id):
        raise ValidationError({"workload": f"Workload {workload.pk} is not one of yours for {pair.verifier.repo_id}."})
    if not name.strip():
        raise ValidationError({"name": "Name the deployment, e.g. prod-eu-1."})
    with transaction.atomic():
        deployment = Deployment.objects.create(
            owner=owner, name=name.strip(), pair=pair, certificate=certificate, workload=workload, temperature=temperature
        )
        measured = selectors.temperatures_measured(deployment=deployment) if temperature else [0.0]
        if temperature not in measured:  # the whole registration is rolled back
            raise ValidationError(
                {
                    "temperature": f"Temperature {temperature:g} was not measured for this pair's certified "
                    f"run; choose one of {', '.join(f'{t:g}' for t in measured) or 'none: no finished run'}."
                }
            )
        token = deployment_token_issue(deployment=deployment)
    return deployment, token


def deployment_token_issue(*, deployment: Deployment) -> str:
    """A new ingest token (the old one stops working); only its SHA-256 is kept."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    deployment.token_hash, deployment.token_hint, deployment.token_revoked_at = token_digest(token), token[:10], None
    deployment.save(update_fields=["token_hash", "token_hint", "token_revoked_at"])
    return token


def deployment_token_revoke(*, deployment: Deployment) -> Deployment:
    deployment.token_hash, deployment.token_revoked_at = "", timezone.now()
    deployment.save(update_fields=["token_hash", "token_revoked_at"])
    return deployment


def deployment_delete(*, deployment: Deployment) -> None:
    deployment.delete()


class IngestRefused(Exception):
    """The push was refused as a whole: nothing of it was stored."""

    def __init__(self, code: str, message: str, details: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details or {}


class IngestThrottled(Exception):
    """The deployment has stored its SPECHUB_LIVE_SNAPSHOTS_PER_MINUTE this minute: nothing of the push was stored."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"At most {limit} snapshots a minute for one deployment: push less often (spechub watch --every 60).")
        self.limit = limit


@dataclass(frozen=True)
class Ingested:
    stored: int
    skipped: int  # equal to snapshots already stored: a retried push
    state: str
    reason: str
    live_al: float | None


def observations_ingest(*, deployment: Deployment, snapshots: Sequence[live.Snapshot], now: float | None = None) -> Ingested:
    """Store the snapshots and the windows they close, then judge the newest windows; all or nothing.

    A snapshot equal to one already stored (a retried push) is skipped; one that contradicts it is refused. The
    per-minute limit is counted under the deployment's row lock (on SQLite, the write lock every transaction takes at
    its start), so pushes at the same moment count each other."""
    with transaction.atomic():
        locked = Deployment.objects.select_for_update().get(pk=deployment.pk)
        rows = _rows(locked, snapshots, time.time() if now is None else now)
        _within_rate(locked, len(rows))
        LiveSnapshot.objects.bulk_create(rows)
        if rows:
            _judge(locked)
    return Ingested(len(rows), len(snapshots) - len(rows), locked.state, locked.state_reason, locked.live_al)


def _within_rate(deployment: Deployment, count: int) -> None:
    limit = settings.SPECHUB_LIVE_SNAPSHOTS_PER_MINUTE
    since = timezone.now() - timedelta(minutes=1)
    if count and LiveSnapshot.objects.filter(deployment=deployment, received_at__gte=since).count() + count > limit:
        raise IngestThrottled(limit)


def deployment_ingest_reset(*, deployment: Deployment, now: float | None = None) -> int:
    """Remove the snapshots read after the server's clock (a watcher's clock that ran ahead), which would put every
    correct push after them out of order; the history up to now stays. Return how many were removed."""
    ahead = datetime.fromtimestamp((time.time() if now is None else now) + live.MAX_CLOCK_AHEAD, UTC)
    with transaction.atomic():
        locked = Deployment.objects.select_for_update().get(pk=deployment.pk)
        removed, _ = LiveSnapshot.objects.filter(deployment=locked, read_at__gt=ahead).delete()
        _judge(locked)
    return removed


def _rows(deployment: Deployment, snapshots: Sequence[live.Snapshot], now: float) -> list[LiveSnapshot]:
    last = latest_snapshot(deployment=deployment)
    previous = as_snapshot(last) if last is not None else None
    rows = []
    for index, snapshot in enumerate(sorted(snapshots, key=lambda s: s.read_at)):
        try:
            live.check(snapshot)
            live.check_clock(snapshot, now=now)
            if _stored_already(deployment, previous, snapshot):
                continue
            window = live.window(previous, snapshot) if previous is not None else None
        except live.Refused as refused:
            message = refused.message + (RESET_HINT if refused.code == "live:out-of-order" else "")
            raise IngestRefused(refused.code, message, {"snapshot": index, "read_at": snapshot.read_at}) from None
        rows.append(_row(deployment, snapshot, window))
        previous = snapshot
    return rows


def _stored_already(deployment: Deployment, previous: live.Snapshot | None, snapshot: live.Snapshot) -> bool:
    """True when `snapshot` equals the previous one or a stored one read at its time: a retry, skipped.
    Refused when one read at that time holds other counts."""
    if previous is None or snapshot.read_at > previous.read_at:
        return False
    same = previous if _same_time(previous, snapshot) else _stored_at(deployment, snapshot.read_at)
    if same is None:
        return False  # not a retry: live.window says it is out of order
    if _values(same) != _values(snapshot):
        raise live.Refused("live:conflict", f"a snapshot read at {snapshot.read_at} is already stored with other counts.")
    return True


def _stored_at(deployment: Deployment, read_at: float) -> live.Snapshot | None:
    rows = LiveSnapshot.objects.filter(deployment=deployment, read_epoch=int(read_at))[:100]
    return next((as_snapshot(r) for r in rows if round(r.read_at.timestamp(), 6) == round(read_at, 6)), None)


def _same_time(a: live.Snapshot, b: live.Snapshot) -> bool:
    return round(a.read_at, 6) == round(b.read_at, 6)


def _values(s: live.Snapshot) -> tuple[object, ...]:
    return (s.drafts, s.draft_tokens, s.accepted, tuple(s.per_position), s.requests)


def _row(deployment: Deployment, snapshot: live.Snapshot, window: live.Window | None) -> LiveSnapshot:
    counts = window.counts if window is not None else live.Counts()
    return LiveSnapshot(
        deployment=deployment,
        read_at=datetime.fromtimestamp(snapshot.read_at, UTC),
        read_epoch=int(snapshot.read_at),
        drafts=snapshot.drafts,
        draft_tokens=snapshot.draft_tokens,
        accepted=snapshot.accepted,
        per_position=list(snapshot.per_position),
        requests=snapshot.requests,
        started_at=snapshot.started_at,
        engine_version=(snapshot.engine_version or "")[:64],
        w_drafts=counts.drafts,
        w_accepted=counts.accepted,
        w_second=counts.squares or 0,
        w_requests=counts.requests,
        w_per_position=list(counts.per_position),
        w_reset=window is not None and window.reset,
    )


def _judge(deployment: Deployment) -> None:
    """The verdict on the newest windows; a change of judgeable state is one deployment.drift event."""
    certified = certified_for(deployment=deployment)
    newest = latest_snapshot(deployment=deployment)
    if certified is None or newest is None:
        return
    counts, *earlier = trailing_spans(deployment=deployment, newest=newest, count=2)
    k, version = len(newest.per_position) or None, newest.engine_version or None
    verdict, reason = live.judge(counts, certified, k=k, engine_version=version, before=earlier[0] if earlier else None)
    if verdict == live.TOO_SMALL:
        if not deployment.state:
            deployment.state_reason = reason
            deployment.save(update_fields=["state_reason"])
        return
    named = low_window_causes(deployment=deployment, verdict=verdict, counts=counts, k_served=k)  # issue 53 §3
    before, reason = deployment.state, f"{reason}. {named}" if named else reason
    deployment.state_reason, deployment.live_al = reason, live.acceptance_length(counts)
    if verdict == before:
        deployment.save(update_fields=["state_reason", "live_al"])
        return
    deployment.state, deployment.state_changed_at = verdict, newest.read_at  # when the counters said so
    deployment.state_changes += 1
    deployment.save(update_fields=["state", "state_reason", "live_al", "state_changed_at", "state_changes"])
    if before or verdict != live.WITHIN:  # the first judgement "within" is no drift
        _drift_notify(deployment, before, certified)


def _drift_notify(deployment: Deployment, before: str, certified: live.Certified) -> None:
    body: DeploymentEvent = {
        "event": WebhookEvent.DRIFT.value,
        "subject": f"deployment-{deployment.pk}-change-{deployment.state_changes}",
        "deployment": deployment.pk,
        "pair": deployment.pair_id,
        "url": f"{settings.SPECHUB_PUBLIC_URL.rstrip('/')}/deployments/{deployment.pk}/",
        "data": {
            "from": before or None,
            "to": deployment.state,
            "reason": deployment.state_reason,
            "live_al": deployment.live_al,
            "certified_band": list(certified.band) if certified.band else None,
        },
    }
    owner_event_notify(owner=deployment.owner, event=WebhookEvent.DRIFT, subject=body["subject"], body=body)


def deployment_recertify(*, deployment: Deployment, user: Any) -> CertificationRun:
    """Queue a certification of the deployment's pair on its certified run's hardware (and workload), requested by
    `user`, its owner, as one of their submissions; refused while a run for that pair and hardware is queued or going.

    A deployment pinned to a certificate is unpinned, so that the new run, once finished, is what holds it."""
    held = certified_run(deployment=deployment)
    if held is None:
        raise ValidationError("The pair has no finished certification to repeat.", code="not-certified")
    with transaction.atomic():
        # Every request for this pair, by whichever owner, waits here: two clicks cannot both find no run.
        Pair.objects.select_for_update().filter(pk=deployment.pair_id).exists()
        pending = recertification_pending(deployment=deployment)
        if pending is not None:
            raise ValidationError(f"Run {pending.pk} already certifies this pair on {pending.hardware} ({pending.state}); "
                                  "the deployment is held to it once it finishes.", code="pending")  # fmt: skip
        try:
            within_submission_quota(user)
        except SubmissionQuotaExceeded as spent:
            raise ValidationError(f"You have used your {spent.limit} submissions per {spent.period}, and a "
                                  "re-certification counts as one; try again later.", code="quota") from None  # fmt: skip
        run = _recertification(deployment, held, user)
        _submission_record(deployment.pair, run, user)
        if deployment.certificate_id is not None:
            deployment.certificate = None
            deployment.save(update_fields=["certificate"])
    return run


def _recertification(deployment: Deployment, held: CertificationRun, user: Any) -> CertificationRun:
    if held.workload is not None:  # the workload's own rules too: its daily runs, and none once deleted
        return workload_certify(workload=held.workload, pairs=[deployment.pair], hardware=held.hardware, requested_by=user)[0]
    return run_create(pair=deployment.pair, hardware=held.hardware, trigger=RunTrigger.MANUAL, requested_by=user)


def _submission_record(pair: Pair, run: CertificationRun, user: Any) -> None:
    """The user's submissions list the run, and the quota counts it."""
    subject = pair.draft or pair.verifier
    Submission.objects.create(submitted_by=user, repo_id=subject.repo_id, revision=subject.sha,
                              verifier_repo_id=pair.verifier.repo_id, verifier_revision=pair.verifier.sha,
                              status=SubmissionStatus.ACCEPTED, pair=pair, run=run,
                              validation_report={"recertify": True})  # fmt: skip


def snapshots_thin(*, now: datetime | None = None) -> int:
    """Keep one snapshot an hour (the hour's last) of those older than SPECHUB_LIVE_KEEP_DAYS, and every snapshot a
    restart follows; each removed snapshot's window is added into the next kept one, so windows still sum to the
    same counts. Return how many were removed."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.SPECHUB_LIVE_KEEP_DAYS)
    removed = 0
    for deployment_id in LiveSnapshot.objects.filter(read_at__lt=cutoff).values_list("deployment", flat=True).distinct():
        with transaction.atomic():
            removed += _thin(deployment_id, cutoff)
    return removed


def _thin(deployment_id: int, cutoff: datetime) -> int:
    rows = list(
        LiveSnapshot.objects.select_for_update().filter(deployment_id=deployment_id, read_at__lt=cutoff).order_by("read_at")
    )
    following = LiveSnapshot.objects.filter(deployment_id=deployment_id, read_at__gte=cutoff).order_by("read_at").first()
    gone: list[int] = []
    carried: list[LiveSnapshot] = []  # removed since the last kept snapshot: their windows go into the next kept one
    for row, after in zip(rows, [*rows[1:], following], strict=True):
        if after is not None and after.read_epoch // 3600 == row.read_epoch // 3600 and not after.w_reset:
            gone.append(row.pk)
            carried.append(row)
            continue
        _absorb(row, carried)
        carried = []
    if following is not None:
        _absorb(following, carried)
    LiveSnapshot.objects.filter(pk__in=gone).delete()
    return len(gone)


def _window(row: LiveSnapshot) -> live.Counts:
    return live.Counts(row.w_drafts, 0, row.w_accepted, tuple(row.w_per_position), row.w_requests, row.w_second)


def _absorb(row: LiveSnapshot, carried: Sequence[LiveSnapshot]) -> None:
    if not carried:
        return
    total = sum((_window(r) for r in carried), _window(row))
    row.w_drafts, row.w_accepted, row.w_requests = total.drafts, total.accepted, total.requests
    row.w_second, row.w_per_position = total.squares or 0, list(total.per_position)
    row.w_reset = row.w_reset or any(r.w_reset for r in carried)
    row.save(update_fields=["w_drafts", "w_accepted", "w_requests", "w_second", "w_per_position", "w_reset"])
