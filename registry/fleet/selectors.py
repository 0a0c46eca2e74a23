"""Reads for self-hosted workers: a user's own workers and their audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from django.conf import settings
from django.db.models import QuerySet

from kernel.certificates import MeasuredOn
from registry.models import CertificationRun, Worker, WorkerEvent


def workers_of(*, user: Any) -> QuerySet[Worker]:
    return Worker.objects.filter(owner=user).prefetch_related("qualifications")


def labels_served(*, owner: Any) -> list[str]:
    """The hardware classes `owner`'s self-hosted workers (not revoked) claim runs on (read here, not in SQL: SQLite
    has no JSON containment)."""
    labels = Worker.objects.filter(owner=owner, revoked_at__isnull=True).values_list("labels", flat=True)
    return sorted({label for found in labels for label in found})


def serves(*, owner: Any, hardware: str) -> bool:
    return hardware in labels_served(owner=owner)


def last_seen_on(*, owner: Any, hardware: str) -> datetime | None:
    """When one of `owner`'s workers on `hardware` last called the registry (or registered, if it never called); None
    when they never had one there, or their account is deactivated (its workers' calls are refused)."""
    if not getattr(owner, "is_active", False):
        return None
    found = Worker.objects.filter(owner=owner).values_list("labels", "last_seen_at", "created_at")
    return max((last or created for labels, last, created in found if hardware in labels), default=None)


def worker_of(*, user: Any, pk: int) -> Worker | None:
    """One of the user's workers (any worker, for staff); None for anyone else's."""
    found = Worker.objects.filter(pk=pk)
    return (found if getattr(user, "is_staff", False) else found.filter(owner=user)).first()


def audit_of(*, user: Any) -> QuerySet[WorkerEvent]:
    return WorkerEvent.objects.filter(worker__owner=user).select_related("worker", "run")


def qualified_labels(worker: Worker) -> list[str]:
    """The worker's hardware classes whose qualification of its engine build it ran on itself."""
    dtype = settings.SPECHUB_ENGINE_DTYPE
    done = set(worker.qualifications.filter(engine_build=worker.engine_build, dtype=dtype).values_list("hardware", flat=True))
    return [label for label in worker.labels if label in done]


def claim_labels(worker: Worker) -> list[str]:
    """The hardware classes the worker may claim runs on now: those it qualified its build on, or all of its labels
    where the registry qualifies no build."""
    return qualified_labels(worker) if settings.SPECHUB_QUALIFY_NEW_BUILDS else list(worker.labels)


def labels_to_qualify(worker: Worker) -> list[str]:
    """The hardware classes the worker must qualify its engine build on before it claims runs there."""
    ready = claim_labels(worker)
    return [label for label in worker.labels if label not in ready]


class Qualify(TypedDict):
    hardware: list[str]  # the classes still to qualify on
    dtype: str
    tv: float
    controls: list[str]


class Standing(TypedDict):
    worker: int
    name: str
    labels: list[str]
    engine_build: str
    public_approved: bool
    ephemeral: bool
    qualify: Qualify


def worker_standing(*, worker: Worker) -> Standing:
    """What a worker is to the registry, and what it must do before it claims: the hardware classes to qualify its
    engine build on, with the settings the controls run with (the hosted pool's)."""
    return {
        "worker": worker.pk, "name": worker.name, "labels": worker.labels, "engine_build": worker.engine_build,
        "public_approved": worker.public_approved, "ephemeral": worker.ephemeral,
        "qualify": {"hardware": labels_to_qualify(worker), "dtype": settings.SPECHUB_ENGINE_DTYPE,
                    "tv": settings.SPECHUB_QUALIFY_TV, "controls": list(settings.SPECHUB_QUALIFY_CONTROLS)},
    }  # fmt: skip


def measured_on(run: CertificationRun) -> MeasuredOn:
    """Where a run was measured: SpecHub's hosted pool, or a team's own machine (its name, its owner, and what it
    reported of its hardware and engine build). The run's API, its page and its certificate say it."""
    worker = run.worker
    if worker is None:
        return {"kind": "hosted", "worker": None, "owner": None, "engine_build": None, "evidence": None}
    return {"kind": "self-hosted", "worker": worker.name, "owner": worker.owner.get_username(),
            "engine_build": worker.engine_build, "evidence": worker.hardware_evidence}  # fmt: skip
