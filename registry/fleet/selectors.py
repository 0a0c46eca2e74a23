"""Reads for self-hosted workers: a user's own workers and their audit log."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from registry.models import Worker, WorkerEvent


def workers_of(*, user: Any) -> QuerySet[Worker]:
    return Worker.objects.filter(owner=user)


def worker_of(*, user: Any, pk: int) -> Worker | None:
    """One of the user's workers (any worker, for staff); None for anyone else's."""
    found = Worker.objects.filter(pk=pk)
    return (found if getattr(user, "is_staff", False) else found.filter(owner=user)).first()


def audit_of(*, user: Any) -> QuerySet[WorkerEvent]:
    return WorkerEvent.objects.filter(worker__owner=user).select_related("worker", "run")
