"""The pages of users' own traffic: your workloads with the upload form, and one workload's report.

Another user's workload is a 404 on every page, never a 403 that would confirm it exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from kernel.errors import RunError
from kernel.result import AtLength
from kernel.traffic import CHUNK, FORMATS
from registry import charts
from registry.celery import hardware_queues
from registry.fleet.selectors import labels_served
from registry.models import Workload
from registry.params import whole_number
from registry.traffic.api import MAX_CONCURRENCY, export_response
from registry.traffic.report import Report, draft_name, notes, workload_report
from registry.traffic.selectors import (
    bench_command,
    sample_line,
    verifier_repo_ids,
    workload_candidates,
    workload_for,
    workloads_of,
)
from registry.traffic.services import workload_certify, workload_create, workload_delete, workload_runs_today


def _quota(user: Any) -> dict[str, int]:
    return {
        "workloads": workloads_of(user=user).filter(owner=user, deleted_at__isnull=True).count(),
        "workload_limit": settings.SPECHUB_WORKLOAD_QUOTA,
        "runs_today": workload_runs_today(owner=user),
        "run_limit": settings.SPECHUB_WORKLOAD_RUN_QUOTA,
    }


@login_required
@require_http_methods(["GET", "POST"])
def workloads(request: HttpRequest) -> HttpResponse:
    """Your workloads, and the form to upload one (the quota shows before you submit)."""
    error = ""
    if request.method == "POST":
        upload = request.FILES.get("file")
        try:
            if upload is None:
                raise ValidationError("Choose a file to upload.")
            workload, _ = workload_create(
                owner=request.user,
                name=request.POST.get("name", ""),
                verifier_repo_id=request.POST.get("verifier", ""),
                chunks=upload.chunks(CHUNK),
            )
            return redirect("workload", pk=workload.pk)
        except RunError as refused:
            error = refused.message
        except ValidationError as refused:
            error = " ".join(refused.messages)
    verifiers = verifier_repo_ids()
    context = {
        "rows": [(w, sample_line(w)) for w in workloads_of(user=request.user)[:100]],
        "verifiers": verifiers,
        "formats": FORMATS,
        "error": error,
        "quota": _quota(request.user),
        "limits": {
            "bytes": settings.SPECHUB_WORKLOAD_MAX_BYTES,
            "requests": settings.SPECHUB_WORKLOAD_MAX_REQUESTS,
            "sample": settings.SPECHUB_WORKLOAD_SAMPLE,
        },
    }
    return render(request, "registry/workloads.html", context, status=422 if error else 200)


@require_http_methods(["GET", "POST"])
def workload_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One workload: what was measured of it, the drafts compared on it, the recommendation, and the certify form."""
    workload = workload_for(user=request.user, pk=pk)
    error = ""
    if request.method == "POST":
        error = _certify(request, workload)
        if not error:
            return redirect("workload", pk=workload.pk)
    concurrency = _concurrency(request.GET.get("concurrency"))
    report = workload_report(workload=workload, concurrency=concurrency, hardware=request.GET.get("hardware"))
    context = {
        "workload": workload,
        "measured": sample_line(workload),
        "notes": notes(workload),
        "report": report,
        "candidates": list(workload_candidates(workload=workload)),
        "hardware": hardware_queues(),
        "own_workers": labels_served(owner=workload.owner),
        "quota": _quota(workload.owner),
        "error": error,
        "command": bench_command(workload),
        **_charts(report),
        "length_charts": _length_charts(report),
    }
    return render(request, "registry/workload.html", context, status=422 if error else 200)


def _certify(request: HttpRequest, workload: Workload) -> str:
    chosen = request.POST.getlist("pair")
    candidates = workload_candidates(workload=workload)
    pairs = list(candidates if "all" in chosen else candidates.filter(pk__in=[whole_number(p, name="pair") for p in chosen]))
    try:
        workload_certify(workload=workload, pairs=pairs, hardware=request.POST.get("hardware", "cpu"), requested_by=request.user,
                         own_machines=request.POST.get("own_machines") == "on")  # fmt: skip
    except ValidationError as refused:
        return " ".join(refused.messages)
    return ""


def _concurrency(given: str | None) -> int:
    return whole_number(given, name="concurrency", high=MAX_CONCURRENCY, default=1)


def _charts(report: Report) -> dict[str, SafeString]:
    candidates = report["candidates"]
    names = [draft_name(c) for c in candidates]
    levels = [row["concurrency"] for row in candidates[0]["speed"]] if candidates else []
    same_levels = [c for c in candidates if [row["concurrency"] for row in c["speed"]] == levels]
    series: dict[str, Sequence[float]] = {draft_name(c): [row["speedup"] for row in c["speed"]] for c in same_levels}
    return {
        "speedup_chart": charts.speedup_lines(levels, series, title="Speedup on your traffic against concurrency", bound=None),
        "acceptance_chart": charts.hbars(
            [c["acceptance"]["mean_acceptance_length"] if c["acceptance"] else None for c in candidates],
            names,
            title="Mean acceptance length on your traffic",
            x_label="mean acceptance length (tokens per step)",
            name="workload-candidates",
        ),
    }


def _length_charts(report: Report) -> list[tuple[str, SafeString, list[AtLength]]]:
    """Each measured draft's acceptance by prompt length on the user's traffic, where its run counted per prompt."""
    found = [(draft_name(c), c["acceptance"].get("by_length", []) if c["acceptance"] else []) for c in report["candidates"]]
    return [(name, charts.by_length(rows, title=f"{name}: acceptance by prompt length"), rows) for name, rows in found if rows]


@require_POST
def workload_remove(request: HttpRequest, pk: int) -> HttpResponse:
    workload_delete(workload=workload_for(user=request.user, pk=pk))
    return redirect("workloads")


@require_GET
def workload_export(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    return export_response(workload_for(user=request.user, pk=pk))
