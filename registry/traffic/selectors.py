"""Reads about users' workloads: the owner's list, one workload, its candidate pairs, its sample and export.

Every function here that takes the requesting user returns only what that user may see: another user's
workload is a 404, never a 403 that would confirm it exists.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from kernel import traffic as kw
from registry.models import HubModel, Pair, Role, Workload


def workloads_of(*, user: Any) -> QuerySet[Workload]:
    """The user's workloads, deleted ones included (their runs keep their figures); every workload for staff."""
    rows = Workload.objects.select_related("verifier", "owner")
    return rows if getattr(user, "is_staff", False) else rows.filter(owner=user)


def verifier_repo_ids() -> list[str]:
    """Every verifier the catalog holds, once per repo id (any database: no DISTINCT ON), for the upload form."""
    rows = HubModel.objects.filter(role=Role.VERIFIER).order_by("repo_id").values_list("repo_id", flat=True)
    return list(rows.distinct())


def workload_for(*, user: Any, pk: int) -> Workload:
    """The user's workload `pk`; anyone else's, or none, is a 404 (never a 403 that confirms it exists)."""
    found = workloads_of(user=user).filter(pk=pk).first() if getattr(user, "is_authenticated", False) else None
    if found is None:
        raise Http404("No such workload.")
    return found


def workload_candidates(*, workload: Workload) -> QuerySet[Pair]:
    """The catalog's gate-compatible drafts for the workload's verifier, at its pinned commit."""
    return (
        Pair.objects.filter(verifier=workload.verifier, compatibility__compatible=True)
        .select_related("draft", "verifier")
        .order_by("draft__repo_id", "method", "num_speculative_tokens")
    )


def sample_line(workload: Workload) -> str:
    """'200 of your 10,000 requests, seed 0': what was measured of what was uploaded."""
    distinct = f" ({workload.unique_requests:,} distinct)" if workload.unique_requests != workload.total_requests else ""
    return f"{workload.sampled or '—'} of your {workload.total_requests:,} requests{distinct}, seed {workload.seed}"


def export_lines(*, workload: Workload) -> Iterator[str]:
    """The measured sample as vLLM's benchmark client reads a custom dataset: the prompt as the engine saw it."""
    for stored in workload.sample:
        request = kw.Request.from_dict(stored)
        yield json.dumps({"prompt": request.text, "output_tokens": request.max_tokens}, ensure_ascii=False) + "\n"


def bench_command(workload: Workload) -> str:
    return (
        "python -m vllm.entrypoints.cli.main bench serve --backend vllm --dataset-name custom "
        f"--dataset-path workload-{workload.pk}.jsonl --skip-chat-template --num-prompts {workload.sampled} "
        f"--model {workload.verifier.repo_id}"
    )
