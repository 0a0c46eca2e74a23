"""Writes for engine qualifications: storing a record, and judging runs again with it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from kernel import qualification as q
from kernel import result
from kernel.builds import installed_engine_build
from kernel.verdict import rejudge
from registry.certificates.publishing import pair_listing_update
from registry.certificates.services import certificate_issue
from registry.dispatch import task_send_on_commit
from registry.models import CertificationRun, EngineQualification, Worker
from registry.runs.engines import qualification_for
from registry.runs.selectors import run_document
from registry.states import RunState

logger = logging.getLogger(__name__)


class QualificationRefused(ValueError):
    """A document that is not a qualification record, or whose digest does not match its content."""


def qualification_load(document: Mapping[str, Any]) -> q.Record:
    """The record, its digest checked, or QualificationRefused saying what is wrong with it."""
    try:
        return q.load(document)
    except q.UnreadableQualification as exc:
        raise QualificationRefused(f"Refused qualification: {exc}.") from None


def qualification_record(
    *, document: Mapping[str, Any], worker: Worker | None = None, rejudge: bool = True
) -> EngineQualification:
    """Store a qualification record (its digest checked) and judge the runs on its build again, all or nothing: the
    hosted runs for a hosted record, a self-hosted `worker`'s own runs for one it ran on itself. Judging re-signs
    certificates: a caller without the signing key stores with `rejudge=False` and sends `runs_rejudge_with` on."""
    record = qualification_load(document)
    failing = [c["name"] for c in record["controls"] if c["outcome"] == q.FAIL]
    passed = all(c["outcome"] in (q.PASS, q.NOT_SUPPORTED) for c in record["controls"])
    with transaction.atomic():
        row, created = EngineQualification.objects.get_or_create(
            digest=record["digest"],
            defaults={"engine": record["engine"], "engine_build": record["engine_build"], "hardware": record["hardware"],
                      "dtype": record["dtype"], "passed": passed, "failing": failing, "document": record,
                      "worker": worker},
        )  # fmt: skip
        if created and rejudge:
            runs_rejudge(record=record, worker=worker)
    return row


def runs_rejudge_with(*, qualification_id: int) -> list[CertificationRun]:
    """Judge the runs a stored qualification covers again (a task, where the signing key is)."""
    row = EngineQualification.objects.select_related("worker").get(pk=qualification_id)
    return runs_rejudge(record=q.load(row.document), worker=row.worker)


def runs_rejudge(*, record: q.Record, worker: Worker | None = None) -> list[CertificationRun]:
    """Judge every finished run on the record's build, hardware and dtype again (the hosted pool's, or the self-hosted
    `worker`'s whose record it is); return those whose verdict changed."""
    finished = CertificationRun.objects.filter(
        state=RunState.FINISHED, engine=record["engine"], engine_version=record["engine_build"], hardware=record["hardware"],
        worker=worker,
    ).select_related("pair")  # fmt: skip
    changed = []
    for run in finished:
        document = run_document(run)
        if (
            document is not None
            and _dtype(document) == record["dtype"]
            and _verdict_apply(run, document, rejudge(document, record))
        ):
            changed.append(run)
    return changed


def runs_rejudge_all() -> list[CertificationRun]:
    """Judge every finished run again under the rules this code holds (each with its build's qualification, if any);
    return those whose verdict changed. After an upgrade that changes a rule (`manage.py rejudge`)."""
    changed = []
    for run in CertificationRun.objects.filter(state=RunState.FINISHED).select_related("pair").order_by("pk"):
        document = run_document(run)
        if document is None:
            continue
        judged = rejudge(document, _qualification_of(run, document))
        if _outcomes(judged) != _outcomes(document) and _verdict_apply(run, document, judged):
            changed.append(run)
    return changed


def _outcomes(document: result.ResultDocument) -> tuple[str | None, dict[str, str]]:
    """The label and each property's outcome: a rule's new wording alone re-signs nothing."""
    judged: Mapping[str, Any] = result.verdict(document) or {}
    properties: Mapping[str, Any] = judged.get("properties") or {}
    return judged.get("verdict"), {name: found.get("outcome") for name, found in properties.items()}


def _verdict_apply(run: CertificationRun, before: result.ResultDocument, judged: result.ResultDocument) -> bool:
    """Store a changed verdict: the run's document, its pair's listing when it is the latest public run, and its
    certificate, signed again (it cites the qualification). False, and nothing written, when nothing changed."""
    if result.verdict(judged) == result.verdict(before):
        return False
    with transaction.atomic():
        run.result = judged
        run.save(update_fields=["result"])
        if run.pair.latest_run_id == run.pk and run.workload_id is None:
            pair_listing_update(run=run)
        certificate_issue(run=run)
    return True


def document_judge(*, run: CertificationRun, document: result.ResultDocument) -> result.ResultDocument:
    """Return a finished run's document judged with the qualification of the build it ran on.

    Without one, the worker's own judgement stands (it had none either).
    """
    qualification = _qualification_of(run, document)
    return rejudge(document, qualification) if qualification else document


def _qualification_of(run: CertificationRun, document: result.ResultDocument) -> q.Record | None:
    build = result.engine_build(document)
    qualification = qualification_for(
        engine=run.engine, engine_build=build, hardware=run.hardware, dtype=_dtype(document), worker=run.worker
    )
    return q.load(qualification.document) if qualification else None


def _dtype(document: result.ResultDocument) -> str:
    plan: Mapping[str, Any] = document.get("spec", {}).get("plan") or {}
    return str(plan.get("dtype", "float32"))


def build_qualify_if_new(*, engine: str, hardware: str, engine_build: str) -> bool:
    """Queue a qualification of a reported build that has none yet (on its own hardware queue); True when queued."""
    dtype = settings.SPECHUB_ENGINE_DTYPE
    if not settings.SPECHUB_QUALIFY_NEW_BUILDS or qualification_for(
        engine=engine, engine_build=engine_build, hardware=hardware, dtype=dtype
    ):
        return False
    task_send_on_commit("registry.qualify_engine", engine, hardware, engine_build, dtype, queue=hardware)
    return True


def build_qualify_here(*, engine: str, hardware: str, engine_build: str, dtype: str) -> str:
    """Run the controls on the build installed in this process and store the record; return its digest, or why not."""
    installed = installed_engine_build(engine)
    if installed != engine_build:  # a worker of another build took it: the build's own workers report it again
        logger.warning("asked to qualify %s %s, but %s is installed here", engine, engine_build, installed)
        return "other-build"
    if qualification_for(engine=engine, engine_build=engine_build, hardware=hardware, dtype=dtype):
        return "already-qualified"
    qualify = import_string(settings.SPECHUB_QUALIFIER)
    record = qualify(engine=engine, hardware=hardware, dtype=dtype, tv=settings.SPECHUB_QUALIFY_TV,
                     controls=settings.SPECHUB_QUALIFY_CONTROLS)  # fmt: skip
    return qualification_record(document=record).digest
