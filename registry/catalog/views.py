"""The catalog's pages: the listing, a pair, the compatibility matrix, the format matrix and the Hub imports."""

from __future__ import annotations

import itertools
import json

from django.conf import settings
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from registry import charts
from registry.catalog.formats import format_matrix
from registry.catalog.selectors import (
    PairPage,
    catalog_choices,
    compatibility_matrix,
    hub_imports,
    pair_page,
    pairs_filtered,
)
from registry.models import Pair
from registry.runs.quantized import quantized_comparison
from registry.views import PAGE_SIZE, page_number


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
def pair_detail(request: HttpRequest, pk: int) -> HttpResponse:
    page = pair_page(pair=get_object_or_404(Pair.objects.select_related("verifier", "draft"), pk=pk))
    acceptance = page["acceptance"]
    context = {
        **page,
        **_pair_charts(page),
        "environment_json": json.dumps(page["environment"], indent=2, sort_keys=True),
        "public_url": settings.SPECHUB_PUBLIC_URL,  # the verify box's --url: the issuer its certificates name
        "quantized": quantized_comparison(run=page["run"]),  # the AL change against the unquantized pair (issue 53)
        # Sampled acceptance rests on the engine's speculative sampling: its own test's outcome is shown beside it.
        "sampling_judged": next((row for row in page["properties"] if row["title"] == "sampling equivalence"), None),
        "temperature_rows": [  # each position's rate beside its interval, for the table's cells
            {**row, "positions": list(itertools.zip_longest(row["per_position"], row["per_position_interval"]))}
            for row in (acceptance.get("by_temperature", []) if acceptance else [])
        ],
    }
    return render(request, "registry/pair.html", context)


def _pair_charts(page: PairPage) -> dict[str, SafeString]:
    """Return the pair page's charts, drawn from the figures its tables show."""
    acceptance, throughput = page["acceptance"], page["throughput"]
    positions = acceptance.get("per_position", []) if acceptance else []
    figures = throughput.get("levels", {}) if throughput else {}
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
            bound=throughput.get("theoretical_bound") if throughput else None,
            intervals=[figures[str(level)].get("speedup_interval") for level in page["levels"]],
        ),
        "length_chart": charts.by_length(acceptance.get("by_length", []) if acceptance else []),
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
def matrix(request: HttpRequest) -> HttpResponse:
    table = compatibility_matrix()
    cells = {(c["verifier"], c["draft"]): c for c in table["cells"]}
    rows = [(verifier, [cells.get((verifier, draft)) for draft in table["drafts"]]) for verifier in table["verifiers"]]
    return render(request, "registry/matrix.html", {"drafts": table["drafts"], "rows": rows})


@require_GET
def formats(request: HttpRequest) -> HttpResponse:
    """Each draft format against each qualified engine build (registry/catalog/formats.py)."""
    table = format_matrix()
    return render(request, "registry/formats.html", {**table})
