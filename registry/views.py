"""Web pages. Views parse the request, call a selector, and render."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_http_methods

from kernel.errors import ERRORS, RunError
from registry import charts
from registry.forms import SubmissionForm
from registry.health import readiness
from registry.models import CertificationRun, Pair
from registry.params import BadParameter, whole_number
from registry.selectors import (
    catalog_choices,
    compatibility_matrix,
    engines_page,
    hub_imports,
    pair_page,
    pairs_filtered,
    run_figures,
    runs_queue,
    submission_quota,
)
from registry.services.submissions import SubmissionQuotaExceeded, submission_create

PAGE_SIZE = 25


def page_number(request: HttpRequest) -> int:
    """The `page` asked for; past the last page, Paginator.get_page gives the last."""
    return whole_number(request.GET.get("page"), name="page", high=10**9, default=1)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 400 page (handler400): a parameter's reason where there is one, never the text of another exception."""
    reason = str(exception) if isinstance(exception, BadParameter) else "The request was malformed."
    return render(request, "registry/bad_request.html", {"reason": reason}, status=400)


@require_GET
def catalog(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()[:200]
    bound, pairs = pairs_filtered(params=request.GET)
    page = Paginator(pairs, PAGE_SIZE).get_page(page_number(request))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"page": page, "search": search, "filter": bound, "query": query.urlencode(), "choices": catalog_choices()}
    return render(request, "registry/catalog.html", context)


@require_GET
def imports(request: HttpRequest) -> HttpResponse:
    """What the Hub import found: each repo at each commit, the pair it gave or the gate's findings."""
    page = Paginator(hub_imports(), PAGE_SIZE).get_page(page_number(request))
    return render(request, "registry/imports.html", {"page": page})


@require_GET
def engines(request: HttpRequest) -> HttpResponse:
    return render(request, "registry/engines.html", {"builds": engines_page()})


@require_GET
def pair_detail(request: HttpRequest, pk: int) -> HttpResponse:
    page = pair_page(pair=get_object_or_404(Pair.objects.select_related("verifier", "draft"), pk=pk))
    page.update(_pair_charts(page))
    page["environment_json"] = json.dumps(page["environment"], indent=2, sort_keys=True)
    # Sampled acceptance rests on the engine's speculative sampling: its own test's outcome is shown beside it.
    page["sampling_judged"] = next((row for row in page["properties"] if row["title"] == "sampling equivalence"), None)
    page["temperature_rows"] = [  # each position's rate beside its interval, for the table's cells
        {**row, "positions": list(zip(row["per_position"], row["per_position_interval"], strict=False))}
        for row in page["acceptance"].get("by_temperature", [])
    ]
    return render(request, "registry/pair.html", page)


def _pair_charts(page: dict[str, Any]) -> dict[str, SafeString]:
    """Return the pair page's charts, drawn from the figures its tables show."""
    positions = page["acceptance"].get("per_position", [])
    throughput = page["throughput"]
    figures = throughput.get("levels", {})
    results = page["results"]
    labels = [result.category for result in results]
    return {
        "acceptance_chart": charts.bars(
            positions, [f"#{i + 1}" for i in range(len(positions))], title="Drafts accepted through each position (cumulative)"
        ),
        "speedup_chart": charts.speedup_lines(
            page["levels"],
            {"speedup": page["speedups"]},
            title="Speedup against concurrency",
            bound=throughput.get("theoretical_bound"),
            intervals=[figures[str(level)].get("speedup_interval") for level in page["levels"]],
        ),
        "length_chart": charts.by_length(page["acceptance"].get("by_length", [])),
        "best_k_chart": charts.by_k(page["best_k"][0]) if page["best_k"] else SafeString(""),
        "workload_al_chart": charts.hbars(
            [result.mean_acceptance_length for result in results],
            labels,
            title="Mean acceptance length per workload",
            x_label="mean acceptance length (tokens per step)",
            name="workload-acceptance",
        ),
        "workload_speedup_chart": charts.hbars(
            [result.speedup for result in results],
            labels,
            title="Speedup at concurrency 1 per workload (indicative: no interval)",
            x_label="speedup at concurrency 1, indicative",
            reference=1.0,
            unit=charts.TIMES,
            name="workload-speedup",
        ),
    }


@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    """Runs still going first, then the most recent ones, with state, stage and progress."""
    page = Paginator(runs_queue(user=request.user), PAGE_SIZE).get_page(page_number(request))
    going = any(not run.is_final for run in page.object_list)
    return render(request, "registry/queue.html", {"page": page, "going": going})


@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    runs = CertificationRun.objects.visible_to(request.user)  # another user's private run is a 404, not a 403
    run = get_object_or_404(runs.select_related("pair__verifier", "pair__draft", "worker__owner"), pk=pk)
    error = ERRORS.get(run.error_code)
    return render(request, "registry/run.html", {"run": run, "hint": error.hint if error else "", **run_figures(run)})


@login_required
@require_http_methods(["GET", "POST"])
def submit(request: HttpRequest) -> HttpResponse:
    """Submit a draft: the gate's verdict shows at once, then the pair is queued (or found)."""
    form = SubmissionForm(request.POST or None)
    quota = submission_quota(user=request.user)
    context: dict[str, object] = {"form": form, "quota": quota}
    if request.method == "POST" and form.is_valid():
        try:
            if int(quota["used"]) >= int(quota["limit"]):  # the fast path; the service checks again as it stores
                raise SubmissionQuotaExceeded(int(quota["used"]), int(quota["limit"]), str(quota["period"]))
            context["submission"] = submission_create(user=request.user, **form.cleaned_data)
        except (RunError, SubmissionQuotaExceeded) as exc:
            context["error"] = exc.message
        except ValidationError as exc:  # a rule of the catalog's (method, draft, hardware): the user's to fix
            context["error"] = " ".join(exc.messages)
        context["quota"] = submission_quota(user=request.user)
    return render(request, "registry/submit.html", context)


@require_GET
def matrix(request: HttpRequest) -> HttpResponse:
    table = compatibility_matrix()
    cells = {(c["verifier"], c["draft"]): c for c in table["cells"]}
    rows = [(verifier, [cells.get((verifier, draft)) for draft in table["drafts"]]) for verifier in table["verifiers"]]
    return render(request, "registry/matrix.html", {"drafts": table["drafts"], "rows": rows})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers. It touches no dependency, so an outage elsewhere never restarts it."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: the database answers (the broker's loss is reported, not fatal)."""
    status, body = readiness()
    response = JsonResponse(body, status=status)
    if status == 503:
        response["Retry-After"] = "30"
    return response
