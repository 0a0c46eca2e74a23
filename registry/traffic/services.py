"""Writes for users' own traffic: upload a workload, certify drafts on it, delete it, and hand it to a worker.

A workload is private to its owner (and staff); its runs are published nowhere public (services.publishing).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import lru_cache, partial
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from kernel import traffic as kw
from kernel.errors import UserError
from registry.accounts.services import user_lock
from registry.catalog.gate import hub_client
from registry.models import CertificationRun, HubModel, Pair, Role, RunTrigger, Workload
from registry.params import echo
from registry.runs.selectors import measuring_plan
from registry.runs.services import UNSERVED, run_cancel, run_create
from registry.states import FINAL_STATES


def workload_limits() -> kw.Limits:
    """Return what an upload may hold on this deployment."""
    return kw.Limits(
        max_bytes=settings.SPECHUB_WORKLOAD_MAX_BYTES,
        max_requests=settings.SPECHUB_WORKLOAD_MAX_REQUESTS,
        sample_size=settings.SPECHUB_WORKLOAD_SAMPLE,
        seed=settings.SPECHUB_WORKLOAD_SEED,
        default_max_tokens=settings.SPECHUB_WORKLOAD_MAX_TOKENS,
    )


class _Counted:
    """The upload's chunks, counting their bytes as the parser pulls them."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks, self.size = chunks, 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.size += len(chunk)
            yield chunk


def workload_create(*, owner: Any, name: str, verifier_repo_id: str, chunks: Iterable[bytes]) -> tuple[Workload, bool]:
    """Store the upload in `chunks` as `owner`'s workload for the verifier; (the row, whether it is new).

    Every request is checked as it streams in; the sample is rendered with the verifier's chat template
    and length-checked before anything is stored. The same requests uploaded again return the first row.
    """
    _storable(name=name, verifier=verifier_repo_id)
    verifier = _verifier(verifier_repo_id)
    _check_quota(owner)  # before reading the upload: a user at the limit waits for nothing
    counted = _Counted(chunks)
    parsed = kw.read_workload(counted, limits=workload_limits())
    template, encode = _verifier_text(verifier.repo_id, verifier.sha)
    done = kw.rendered(parsed, template, encode, measuring_plan().max_model_len)
    with transaction.atomic():
        user_lock(owner)  # and again under the owner's lock: uploads at once count each other
        existing = Workload.objects.filter(owner=owner, verifier=verifier, sha256=parsed.sha256, deleted_at__isnull=True).first()
        if existing is not None:
            return existing, False
        _check_quota(owner)
        return _stored(owner, name, verifier, done, counted.size), True


def _stored(owner: Any, name: str, verifier: HubModel, done: kw.Workload, size: int) -> Workload:
    return Workload.objects.create(
        owner=owner,
        name=(name.strip() or f"{done.format} upload")[:100],
        verifier=verifier,
        sha256=done.sha256,
        format=done.format,
        total_requests=done.total,
        unique_requests=done.unique,
        seed=done.seed,
        size_bytes=size,
        categories=done.categories,
        sample=[request.as_dict() for request in done.sample],
    )


def _storable(**fields: str) -> None:
    for field, value in fields.items():
        if kw.UNSTORABLE.search(value):
            raise ValidationError(
                f"The {field} holds a NUL character or half of a UTF-16 surrogate pair, which cannot be stored; remove it.",
                code="invalid",
            )


def _verifier(repo_id: str) -> HubModel:
    found = HubModel.objects.filter(repo_id=repo_id, role=Role.VERIFIER).order_by("-created_at").first()
    if found is None:
        raise ValidationError(
            f"{echo(repo_id)} is not a verifier in the catalog; pick one listed at /api/v1/pairs/.", code="unknown-verifier"
        )
    return found


def _check_quota(owner: Any) -> None:
    live = Workload.objects.filter(owner=owner, deleted_at__isnull=True).count()
    if live >= settings.SPECHUB_WORKLOAD_QUOTA:
        raise ValidationError(
            f"You have {live} workloads, the limit per user; delete one you no longer need, then upload again.", code="quota"
        )


@lru_cache(maxsize=8)
def _verifier_text(repo_id: str, sha: str) -> tuple[kw.ChatTemplate | None, Callable[[str], int]]:
    """The verifier's chat template and a token counter, read from its pinned tokenizer files (no code runs)."""
    from tokenizers import Tokenizer

    metadata = hub_client().metadata(repo_id, sha)
    if metadata.tokenizer is None:
        raise UserError("workload:invalid", f"The verifier {repo_id} has no readable tokenizer.json to measure prompts with.")
    tokenizer = Tokenizer.from_str(json.dumps(metadata.tokenizer))
    return kw.ChatTemplate.from_tokenizer_config(metadata.tokenizer_config), lambda text: len(tokenizer.encode(text).ids)


def workload_certify(
    *, workload: Workload, pairs: list[Pair], hardware: str, requested_by: Any, own_machines: bool = False
) -> list[CertificationRun]:
    """Queue a private certification of each pair on the workload (with `own_machines`, on the owner's self-hosted
    workers only); all or none."""
    if workload.deleted_at is not None:
        raise ValidationError("This workload was deleted; upload it again to certify on it.", code="deleted")
    if not pairs:
        raise ValidationError("Pick at least one draft for this verifier.", code="no-drafts")
    foreign = [pair.pk for pair in pairs if pair.verifier_id != workload.verifier_id]
    if foreign:
        raise ValidationError(
            f"Pairs {foreign} are not for this workload's verifier {workload.verifier.repo_id}.", code="wrong-verifier"
        )
    with transaction.atomic():
        user_lock(workload.owner)
        used = workload_runs_today(owner=workload.owner)
        if used + len(pairs) > settings.SPECHUB_WORKLOAD_RUN_QUOTA:
            limit = settings.SPECHUB_WORKLOAD_RUN_QUOTA
            raise ValidationError(
                f"{len(pairs)} more runs would pass your limit of {limit} a day ({used} used); pick fewer drafts.", code="quota"
            )
        queue = partial(run_create, hardware=hardware, trigger=RunTrigger.MANUAL, requested_by=requested_by,
                        workload=workload, own_machines=own_machines)  # fmt: skip
        return [queue(pair=pair) for pair in pairs]


def workload_runs_today(*, owner: Any) -> int:
    """The runs on `owner`'s workloads in the last 24 h, less those their own machines never came for (refunded)."""
    since = timezone.now() - timedelta(days=1)
    runs = CertificationRun.objects.filter(workload__owner=owner, created_at__gte=since)
    return runs.exclude(error_code=UNSERVED).count()


def workload_delete(*, workload: Workload) -> Workload:
    """Remove the prompts; runs keep their aggregate figures, and unfinished ones are cancelled.

    A run's error message is cleared too: an engine's message may quote a request.
    """
    with transaction.atomic():
        for run in workload.runs.exclude(state__in=FINAL_STATES):
            run_cancel(run_id=run.pk)
        workload.runs.exclude(error_message="").update(error_message="")
        workload.sample, workload.deleted_at = [], timezone.now()
        workload.save(update_fields=["sample", "deleted_at"])
    mine = set(workload.runs.values_list("pk", flat=True))  # another owner's identical upload keeps its files
    for path in kw.workload_dir().glob(f"{workload.sha256}.run*"):
        if kw.workload_run_of(path) in mine:
            path.unlink(missing_ok=True)
    return workload


def workload_files_clear() -> list[str]:
    """Remove the workload files of runs that ended; a killed run (hard time limit, OOM) skipped its own cleanup.

    Called when a worker starts. A file whose run is still going stays: another worker on this host may be reading it.
    """
    left = {path: run for path in kw.workload_dir().glob("*.run*") if (run := kw.workload_run_of(path)) is not None}
    going = set(
        CertificationRun.objects.filter(pk__in=left.values()).exclude(state__in=FINAL_STATES).values_list("pk", flat=True)
    )
    ended = sorted(path for path, run_id in left.items() if run_id not in going)
    for path in ended:
        path.unlink(missing_ok=True)
    return [path.name for path in ended]


@contextmanager
def workload_file(*, run_id: int, reference: str) -> Iterator[None]:
    """Leave a run's workload where its worker reads it (`sha256:<hex>`), for as long as the run measures.

    The spec carries only the hash; the prompts live on the worker's disk only while it needs them.
    """
    if kw.REFERENCE.fullmatch(reference) is None:
        yield
        return
    workload = Workload.objects.get(runs__pk=run_id)
    if workload.deleted_at is not None:
        raise UserError("workload:invalid", "The workload was deleted before this run measured it.")
    path = kw.workload_path(workload.sha256, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    kw.write_sample(path, workload.sha256, workload.sample)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
