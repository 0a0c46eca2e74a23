"""Reads about engine builds: their qualification records and the engines page."""

from __future__ import annotations

from typing import Any, TypedDict, cast

from django.db.models import Q

from kernel.qualification import Control, Probe, Record
from registry.models import EngineQualification, Worker


def qualification_for(
    *, engine: str, engine_build: str, hardware: str, dtype: str, worker: Worker | None = None
) -> EngineQualification | None:
    """Return the newest qualification of this engine build on this hardware class and dtype: the hosted pool's, or
    the one a self-hosted `worker` ran on itself (neither judges the other's runs)."""
    found = EngineQualification.objects.filter(
        engine=engine, engine_build=engine_build, hardware=hardware, dtype=dtype, worker=worker
    )
    return found.first()


def engine_qualifications() -> list[EngineQualification]:
    """Return the newest qualification of each engine build x hardware class x dtype, newest first."""
    newest: dict[tuple[str, str, str, str], EngineQualification] = {}
    for row in EngineQualification.objects.filter(worker__isnull=True):  # ordered newest first: the first seen is kept
        newest.setdefault((row.engine, row.engine_build, row.hardware, row.dtype), row)
    return list(newest.values())


def record_of(row: EngineQualification) -> Record:
    """The row's record: stored only after kernel.qualification read it whole and matched its digest."""
    return cast(Record, row.document)


def qualification_by_digest(*, digest: str, user: Any) -> EngineQualification | None:
    """The record with `digest` that `user` may read: the hosted pool's, anyone; a self-hosted worker's, its owner and
    staff only (None for anyone else, as for a digest that names none)."""
    found = EngineQualification.objects.filter(digest=digest)
    if getattr(user, "is_staff", False):
        return found.first()
    mine = Q(worker__owner=user) if getattr(user, "is_authenticated", False) else Q(pk__in=[])
    return found.filter(Q(worker__isnull=True) | mine).first()


class ControlSummary(TypedDict):
    """A control as the engines page and API list it; the record holds its tests."""

    name: str
    method: str | None
    draft: str | None
    outcome: str
    summary: str


class ProbeRow(Probe):
    mode: str  # the sampling mode the probe ran in


class ControlRow(ControlSummary):
    tests: list[ProbeRow]  # one per mode and probe: p-value, samples, and the TV it detects


def control_summary(control: Control) -> ControlSummary:
    """Read leniently, as before records were typed: a key an older record lacks is null, not a server error."""
    return {"name": control["name"], "method": control.get("method"), "draft": control.get("draft"),
            "outcome": control["outcome"], "summary": control.get("summary", "")}  # fmt: skip


class BuildPage(TypedDict):
    qualification: EngineQualification
    controls: list[ControlRow]
    not_judgeable: list[str]  # the methods whose pairs' sampling cannot be judged on this build


def engines_page() -> list[BuildPage]:
    """Return each qualified build with its controls' tests flattened for a table, and what they mean for pairs."""
    pages: list[BuildPage] = []
    for row in engine_qualifications():
        controls = record_of(row)["controls"]
        rows: list[ControlRow] = [
            {**control_summary(c), "tests": [{"mode": m["mode"], **p} for m in c["sampling"] for p in m["probes"]]}
            for c in controls
        ]
        failing = {c["method"] for c in controls if c["outcome"] == "fail"}
        methods = {c["method"] for c in controls}
        every = sorted(m for m in methods if m) if None in failing else sorted(m for m in failing if m is not None)
        pages.append({"qualification": row, "controls": rows, "not_judgeable": every})
    return pages
