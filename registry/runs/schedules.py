"""Writes the schedules make: periodic tasks in the database, engine reports, re-certification sweeps."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from registry.celery import NOTIFICATION_TASKS
from registry.certificates.services import certificates_expire
from registry.models import Certificate, CertificationRun, EngineBuild, Pair, Priority, RunTrigger, Verdict, WebhookEvent
from registry.notifications.payloads import Expired
from registry.notifications.services import pair_event_notify
from registry.runs.selectors import OwnMachinesWait, own_machines_wait
from registry.runs.services import run_create, run_dispatch, run_fail_unserved
from registry.states import FINAL_STATES, RunState

# Verdicts of pairs that hold a certificate worth keeping current.
_KEPT_CURRENT = (Verdict.CERTIFIED, Verdict.PROVISIONAL, Verdict.EXPIRED)


def schedules_install() -> list[str]:
    """Create or update SpecHub's periodic tasks for beat's database scheduler; return their names."""
    every = _interval(settings.SPECHUB_SWEEP_SECONDS)
    nightly, _ = CrontabSchedule.objects.get_or_create(
        minute="0", hour=str(settings.SPECHUB_EXPIRY_SWEEP_HOUR), day_of_week="*", day_of_month="*", month_of_year="*",
        timezone="UTC",
    )  # fmt: skip
    tasks = {
        "spechub: re-queue stale runs": ("registry.sweep_stale_runs", {"interval": every}),
        "spechub: recover lost dispatches": ("registry.dispatch_lost_runs", {"interval": every}),
        "spechub: fail runs no own machine came for": ("registry.fail_unserved_runs", {"interval": every}),
        "spechub: retry due webhooks": ("registry.deliver_due_webhooks", {"interval": every}),
        "spechub: retry due emails": ("registry.send_due_emails", {"interval": every}),
        "spechub: open missing Hub PRs": ("registry.publish_pending_certificates", {"interval": every}),
        "spechub: re-certify on engine change": (
            "registry.recertify_engine_changes",
            {"interval": _interval(settings.SPECHUB_ENGINE_CHECK_SECONDS)},
        ),
        "spechub: certificate expiry sweep": ("registry.sweep_expiring_certificates", {"crontab": nightly}),
        "spechub: thin old live snapshots": ("registry.thin_live_snapshots", {"crontab": nightly}),
    }
    if settings.SPECHUB_IMPORT_REPOS or settings.SPECHUB_IMPORT_COLLECTION:
        tasks["spechub: import from the Hub"] = (
            "registry.import_from_hub",
            {"interval": _interval(settings.SPECHUB_IMPORT_SECONDS)},
        )
    for name, (task, schedule) in tasks.items():
        queue = settings.SPECHUB_NOTIFICATIONS_QUEUE if task in NOTIFICATION_TASKS else "default"
        defaults = {"task": task, "interval": None, "crontab": None, "enabled": True, "queue": queue, **schedule}
        PeriodicTask.objects.update_or_create(name=name, defaults={**defaults, "kwargs": json.dumps({})})
    return list(tasks)


def _interval(seconds: int) -> IntervalSchedule:
    schedule, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
    return schedule


def engine_build_report(*, hardware: str, engine: str, version: str, worker: str) -> EngineBuild:
    """Record that a worker serving `hardware` runs `engine` at `version`."""
    build, _ = EngineBuild.objects.update_or_create(
        hardware=hardware, engine=engine, version=version, defaults={"reported_by": worker}
    )
    return build


def current_engine_builds() -> list[EngineBuild]:
    """Return the newest reported build of each engine on each hardware class."""
    newest: dict[tuple[str, str], EngineBuild] = {}
    for build in EngineBuild.objects.order_by("first_seen_at", "id"):
        newest[(build.hardware, build.engine)] = build
    return list(newest.values())


def pairs_recertify_for_engines() -> list[CertificationRun]:
    """Queue a low-priority re-certification of every certified pair measured on an older engine build."""
    queued = []
    for build in current_engine_builds():
        outdated = Pair.objects.filter(
            verdict__in=_KEPT_CURRENT, hardware=build.hardware, latest_run__engine=build.engine
        ).exclude(engine_version=build.version)
        queued += [_recertify(pair, build.hardware, build.engine, RunTrigger.ENGINE_CHANGE) for pair in _idle(outdated)]
    return queued


def _idle(pairs: QuerySet[Pair]) -> list[Pair]:
    """Return the pairs with no run waiting or going: a sweep must never queue a second one."""
    # A user's private run on their own workload never holds up the public certificate's renewal.
    busy = CertificationRun.objects.public().exclude(state__in=FINAL_STATES).values("pair_id")
    return list(pairs.exclude(pk__in=busy).select_related("latest_run"))


def _recertify(pair: Pair, hardware: str, engine: str, trigger: str) -> CertificationRun:
    return run_create(pair=pair, hardware=hardware, engine=engine, trigger=trigger, priority=Priority.LOW)


def certificates_sweep(*, now: datetime | None = None) -> tuple[list[Certificate], list[CertificationRun]]:
    """Mark lapsed certificates expired (and tell owners), and re-certify pairs whose certificate expires soon."""
    now = now or timezone.now()
    expired = certificates_expire(now=now)
    for certificate in expired:
        data: Expired = {"certificate_digest": certificate.digest, "expires_at": certificate.expires_at.isoformat()}
        pair_event_notify(pair=certificate.pair, event=WebhookEvent.EXPIRED, subject=f"certificate-{certificate.pk}", data=data)
    soon = now + timedelta(days=settings.SPECHUB_CERTIFICATE_RENEW_DAYS)
    due = Pair.objects.filter(verdict__in=_KEPT_CURRENT, latest_run__certificate__expires_at__lte=soon)
    queued = [
        _recertify(pair, pair.hardware, pair.latest_run.engine, RunTrigger.EXPIRY) for pair in _idle(due) if pair.latest_run
    ]
    return expired, queued


def runs_dispatch_lost(*, now: datetime | None = None) -> list[int]:
    """Send again every queued run whose dispatch never reached the broker, or that the broker lost."""
    now = now or timezone.now()
    never = Q(dispatched_at__isnull=True, created_at__lt=now - timedelta(seconds=settings.SPECHUB_DISPATCH_GRACE_SECONDS))
    # Longer than a worker may hold a message: no worker has it, so the broker lost it.
    lost = Q(dispatched_at__lt=now - timedelta(seconds=settings.CELERY_VISIBILITY_TIMEOUT))
    waiting = CertificationRun.objects.filter(never | lost, state=RunState.QUEUED, own_machines=False).values_list(
        "pk", flat=True
    )
    return [run_id for run_id in list(waiting.values_list("pk", flat=True)) if run_dispatch(run_id=run_id)]


def runs_fail_unserved(*, now: datetime | None = None) -> list[int]:
    """Fail each run for its owner's own machines only that waited SPECHUB_OWN_MACHINES_WAIT_SECONDS with none of
    their workers on its hardware class calling (own-machines:no-worker); their daily runs no longer count it."""
    now = now or timezone.now()
    waiting = CertificationRun.objects.filter(state=RunState.QUEUED, own_machines=True).select_related("workload__owner")
    failed: list[int] = []
    for run in waiting:
        wait = own_machines_wait(run=run)
        if wait is not None and wait["deadline"] <= now and run_fail_unserved(run_id=run.pk, detail=_unserved(wait)):
            failed.append(run.pk)
    return failed


def _unserved(wait: OwnMachinesWait) -> str:
    hours = settings.SPECHUB_OWN_MACHINES_WAIT_SECONDS / 3600
    seen = wait["last_seen"]
    last = f"the last one called at {seen:%Y-%m-%d %H:%M} UTC" if seen else "none ever did"
    return f"It waited {hours:g} h with none of your workers on {wait['hardware']} calling the registry ({last})."
