"""The certification task: the run's lifecycle around the director, which does the work.

The director and its stages know nothing of Django; the stages are found by the dotted
path in SPECHUB_DIRECTOR_STAGES, so this module imports nothing from the workers' core.
"""

from __future__ import annotations

import logging
import os
import socket
from contextlib import AbstractContextManager, nullcontext

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection

from kernel.director import Director, load_stages
from kernel.errors import InfraError, RunError
from kernel.heartbeat import Heartbeat
from kernel.result import ResultDocument
from kernel.spec import RunSpec
from registry.celery import app
from registry.runs import services as runs
from registry.tasks.timelimit import TimeLimits
from registry.traffic.services import workload_file

logger = logging.getLogger(__name__)


class CertifyTask(Task):  # type: ignore[type-arg]
    """Owns a run's lifecycle: claiming, heartbeats, error classification and retries.

    The work itself is the director's; this class only turns its progress and
    errors into run states through registry.runs.services.
    """

    acks_late = True
    reject_on_worker_lost = True
    max_retries = None  # attempts are bounded by the run row, not by Celery

    def drive(self, run_id: int) -> str:
        worker = f"{self.request.hostname or socket.gethostname()}:{os.getpid()}"
        try:
            spec = runs.run_claim(run_id=run_id, worker=worker)
        except runs.RunBusy as busy:
            logger.info("%s; checking again later", busy)
            if self.request.is_eager:  # in-process, a retry would spin at once
                return "busy"
            raise self.retry(countdown=settings.SPECHUB_STALE_AFTER_SECONDS) from None
        if spec is None:
            return "already-final"
        return self._attempt(spec)

    def _attempt(self, spec: RunSpec) -> str:
        try:
            with (
                self._limits(spec),
                Heartbeat(lambda: _beat(spec), settings.SPECHUB_HEARTBEAT_SECONDS),
                workload_file(run_id=spec.run_id, reference=spec.plan.workloads),
            ):
                document = self._direct(spec)
            runs.run_finish(run_id=spec.run_id, attempt=spec.attempt, document=document)
        except runs.RunNotActive as gone:
            logger.info("stopping: %s", gone)
            return "superseded"
        except RunError as error:
            return self._fail(spec, error)
        return "finished"

    def _limits(self, spec: RunSpec) -> AbstractContextManager[object]:
        if self.request.is_eager:  # in-process: never signal or end the web process
            return nullcontext()
        soft, hard = settings.SPECHUB_RUN_SOFT_TIME_LIMIT, settings.SPECHUB_RUN_HARD_TIME_LIMIT
        return TimeLimits(soft, hard, on_hard=lambda: _fail_hard_limit(spec))

    def _direct(self, spec: RunSpec) -> ResultDocument:
        def progress(stage: str, percent: int) -> None:
            runs.run_progress(run_id=spec.run_id, attempt=spec.attempt, stage=stage, percent=percent)

        try:
            director = Director(load_stages(settings.SPECHUB_DIRECTOR_STAGES))
            return director.run(spec, progress)
        except SoftTimeLimitExceeded:
            raise InfraError("worker:time-limit") from None
        except (RunError, runs.RunNotActive):
            raise
        except Exception as exc:
            logger.exception("run %s crashed", spec.run_id)
            raise InfraError("worker:crashed", f"{type(exc).__name__}: {exc}.") from exc

    def _fail(self, spec: RunSpec, error: RunError) -> str:
        logger.warning("run %s attempt %s failed: %s", spec.run_id, spec.attempt, error.message)
        if runs.run_fail(run_id=spec.run_id, attempt=spec.attempt, error=error):
            backoff = settings.SPECHUB_RETRY_BACKOFF_SECONDS * 2 ** (spec.attempt - 1)
            raise self.retry(countdown=backoff)
        return "failed"


def _fail_hard_limit(spec: RunSpec) -> None:
    error = InfraError("worker:time-limit", f"The hard limit of {settings.SPECHUB_RUN_HARD_TIME_LIMIT} s ended the worker.")
    try:
        runs.run_fail(run_id=spec.run_id, attempt=spec.attempt, error=error)
    finally:
        connection.close()


def _beat(spec: RunSpec) -> bool:
    try:
        return runs.run_heartbeat(run_id=spec.run_id, attempt=spec.attempt)
    finally:
        connection.close()  # the heartbeat thread's own connection


def _certify(self: CertifyTask, run_id: int) -> str:
    """Certify one run, from claim to published results."""
    return self.drive(run_id)


def _registered(name: str) -> CertifyTask:
    soft, hard = settings.SPECHUB_RUN_SOFT_TIME_LIMIT, settings.SPECHUB_RUN_HARD_TIME_LIMIT
    return app.task(base=CertifyTask, bind=True, name=name, soft_time_limit=soft, time_limit=hard)(_certify)


certify = _registered("registry.certify")
# The name the task had until 2026-12: messages queued under it before an upgrade still run.
certify_by_its_old_name = _registered("workers.certify")
