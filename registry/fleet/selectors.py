"""Reads for self-hosted workers: a user's own workers and their audit log."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from registry.models import CertificationRun, Worker, WorkerEvent


def workers_of(*, user: Any) -> QuerySet[Worker]:
    return Worker.objects.filter(owner=user)


def worker_of(*, user: Any, pk: int) -> Worker | None:
    """One of the user's workers (any worker, for staff); None for anyone else's."""
    found = Worker.objects.filter(pk=pk)
    return (found if getattr(user, "is_staff", False) else found.filter(owner=user)).first()


def audit_of(*, user: Any) -> QuerySet[WorkerEvent]:
    return WorkerEvent.objects.filter(worker__owner=user).select_related("worker", "run")


def measured_on(run: CertificationRun) -> dict[str, Any]:
    """Where a run was measured: SpecHub's hosted pool, or a team's own machine (its name, its owner, and what it
    reported of its hardware and engine build). The run's API, its page and its certificate say it."""
    worker = run.worker
    if worker is None:
        return {"kind": "hosted", "worker": None, "owner": None, "engine_build": None, "evidence": None}
    return {"kind": "self-hosted", "worker": worker.name, "owner": worker.owner.get_username(),
            "engine_build": worker.engine_build, "evidence": worker.hardware_evidence}  # fmt: skip
