"""Celery tasks for the schedules, webhooks and Hub publishing: thin interfaces over services."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery.signals import worker_ready
from django.conf import settings

from kernel import children
from kernel.builds import installed_engine_build
from kernel.errors import RunError
from registry.catalog import imports
from registry.celery import app, hardware_queues
from registry.certificates import publishing
from registry.fleet import services as fleet
from registry.notifications import services as notifications
from registry.runs import qualifications, schedules
from registry.runs import services as runs
from registry.traffic import services as traffic

logger = logging.getLogger(__name__)


@app.task(name="registry.import_from_hub")
def import_from_hub() -> list[str]:
    """Gate the repos and the collection the settings name; say what came of each."""
    return [f"{found.repo_id}: {found.outcome} ({found.detail})" for found in imports.hub_import_configured()]


@app.task(name="registry.sweep_stale_runs")
def sweep_stale_runs() -> list[int]:
    """Re-queue runs whose heartbeat went quiet (their attempts are bounded)."""
    return runs.runs_requeue_stale()


@app.task(name="registry.finish_upload")
def finish_upload(run_id: int, attempt: int) -> str:
    """Judge, store and sign a self-hosted worker's upload: this process holds the signing key, the web tier does not."""
    return "finished" if fleet.upload_finish(run_id=run_id, attempt=attempt) else "no longer that attempt's"


@app.task(name="registry.rejudge_with_qualification")
def rejudge_with_qualification(qualification_id: int) -> list[int]:
    """Judge a self-hosted worker's finished runs again with the qualification it sent (re-signing their certificates)."""
    return [run.pk for run in qualifications.runs_rejudge_with(qualification_id=qualification_id)]


@app.task(name="registry.dispatch_lost_runs")
def dispatch_lost_runs() -> list[int]:
    """Dispatch queued runs whose message never reached the broker."""
    return schedules.runs_dispatch_lost()


@app.task(name="registry.fail_unserved_runs")
def fail_unserved_runs() -> list[int]:
    """Fail runs for their owners' own machines that none of those machines came for in time."""
    return schedules.runs_fail_unserved()


@app.task(name="registry.deliver_due_webhooks")
def deliver_due_webhooks() -> list[int]:
    """Retry webhook deliveries whose backoff has passed."""
    return notifications.webhooks_deliver_due()


@app.task(name="registry.deliver_webhook")
def deliver_webhook(delivery_id: int) -> str:
    """Make the first attempt at one delivery; retries belong to the sweep, which survives a broker loss."""
    return notifications.webhook_deliver(delivery_id=delivery_id)


@app.task(name="registry.send_due_emails")
def send_due_emails() -> list[int]:
    """Retry emails whose backoff has passed."""
    return notifications.emails_send_due()


@app.task(name="registry.publish_pending_certificates")
def publish_pending_certificates() -> list[int]:
    """Dispatch Hub PRs for certificates whose PR was never opened (a lost dispatch, a long outage)."""
    return publishing.certificates_publish_pending()


@app.task(name="registry.recertify_engine_changes")
def recertify_engine_changes() -> list[int]:
    """Queue low-priority re-certifications of pairs measured on an older engine build."""
    return [run.pk for run in schedules.pairs_recertify_for_engines()]


@app.task(name="registry.sweep_expiring_certificates")
def sweep_expiring_certificates() -> dict[str, list[int]]:
    """Expire lapsed certificates and re-certify pairs whose certificate expires soon."""
    expired, queued = schedules.certificates_sweep()
    return {"expired": [c.pk for c in expired], "queued": [r.pk for r in queued]}


@app.task(name="registry.publish_certificate_to_hub", bind=True, max_retries=5)
def publish_certificate_to_hub(self: Any, certificate_id: int) -> str:
    """Open the certificate's PR on the draft's Hub repo; infrastructure failures retry with backoff."""
    try:
        return publishing.certificate_hub_pr_open(certificate_id=certificate_id)
    except RunError as error:
        if not error.retryable:
            logger.warning("certificate %s not published: %s", certificate_id, error.message)
            publishing.certificate_hub_pr_refused(certificate_id=certificate_id, error=error)
            return error.code
        raise self.retry(countdown=settings.SPECHUB_RETRY_BACKOFF_SECONDS * 2**self.request.retries) from error


@worker_ready.connect
def report_engine_build(sender: Any, **_: Any) -> None:
    """Tell the registry which engine build this worker brings to each hardware queue it serves."""
    cleared = traffic.workload_files_clear()
    if cleared:
        logger.info("removed %d workload files a killed run left behind", len(cleared))
    ended = children.orphans_end()
    if ended:
        logger.warning("ended %d engine servers a dead worker left running: %s", len(ended), ended)
    engine = settings.SPECHUB_DEFAULT_ENGINE
    version = installed_engine_build(engine)
    if not version:
        return
    worker = f"{getattr(sender, 'hostname', socket.gethostname())}:{os.getpid()}"
    for queue in sender.app.amqp.queues.consume_from or {}:
        if queue not in hardware_queues():  # default and notifications run no engine
            continue
        try:
            schedules.engine_build_report(hardware=queue, engine=engine, version=version, worker=worker)
            qualifications.build_qualify_if_new(engine=engine, hardware=queue, engine_build=version)
        except Exception:  # a worker that cannot report still certifies; the next start reports again
            logger.exception("could not report %s %s on %s", engine, version, queue)
        else:
            logger.info("reported %s %s on %s", engine, version, queue)


@app.task(name="registry.thin_live_snapshots")
def thin_live_snapshots() -> int:
    """Thin deployments' snapshots past SPECHUB_LIVE_KEEP_DAYS to one an hour; their windows still sum the same."""
    from registry.deployments.services import snapshots_thin

    return snapshots_thin()
