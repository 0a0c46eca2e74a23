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
from registry.dispatch import task_send_on_commit
from registry.models import CertificationRun, EngineQualification
from registry.selectors import qualification_for, run_document
from registry.services.certificates import certificate_issue
from registry.services.publishing import pair_listing_update
from registry.states import RunState

logger = logging.getLogger(__name__)


class QualificationRefused(ValueError):
    """A document that is not a qualification record, or whose digest does not match its content."""


def qualification_record(*, document: Mapping[str, Any]) -> EngineQualification:
    """Store a qualification record (its digest checked) and judge the runs on its build again, all or nothing."""
    try:
        record = q.load(document)
    except q.UnreadableQualification as exc:
        raise QualificationRefused(f"Refused qualification: {exc}.") from None
    failing = [c["name"] for c in record["controls"] if c["outcome"] == q.FAIL]
    passed = all(c["outcome"] in (q.PASS, q.NOT_SUPPORTED) for c in record["controls"])
    with transaction.atomic():
        row, created = EngineQualification.objects.get_or_create(
            digest=record["digest"],
            defaults={"engine": record["engine"], "engine_build": record["engine_build"], "hardware": record["hardware"],
                      "dtype": record["dtype"], "passed": passed, "failing": failing, "document": record},
        )  # fmt: skip
        if created:
            runs_rejudge(record=record)
    return row


def runs_rejudge(*, record: q.Record) -> list[CertificationRun]:
    """Judge every finished run on the record's build, hardware and dtype again; return those whose verdict changed.

    A changed verdict updates the run's document, its pair's listing when it is the latest run,
    and its certificate, signed again to cite the qualification.
    """
    finished = CertificationRun.objects.filter(
        state=RunState.FINISHED, engine=record["engine"], engine_version=record["engine_build"], hardware=record["hardware"]
    ).select_related("pair")
    changed = []
    for run in finished:
        document = run_document(run)
        if document is None or _dtype(document) != record["dtype"]:
            continue
        judged = rejudge(document, record)
        if result.verdict(judged) == result.verdict(document):
            continue
        run.result = judged
        run.save(update_fields=["result"])
        if run.pair.latest_run_id == run.pk and run.workload_id is None:
            pair_listing_update(run=run)
        certificate_issue(run=run)
        changed.append(run)
    return changed


def document_judge(*, run: CertificationRun, document: result.ResultDocument) -> result.ResultDocument:
    """Return a finished run's document judged with the qualification of the build it ran on.

    Without one, the worker's own judgement stands (it had none either).
    """
    qualification = qualification_for(
        engine=run.engine, engine_build=result.engine_build(document), hardware=run.hardware, dtype=_dtype(document)
    )
    return rejudge(document, q.load(qualification.document)) if qualification else document


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
