"""Web pages. Views parse the request, call a selector, and render."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from registry.health import health_report
from registry.selectors import pairs_list

PAGE_SIZE = 25


@require_GET
def catalog(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()[:200]
    page = Paginator(pairs_list(search=search), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "registry/catalog.html", {"page": page, "search": search})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    report = health_report()
    down = [part for part, status in report.items() if status.startswith("down")]
    body: dict[str, object] = {"status": "ok" if not down else "down", "parts": report}
    if down:
        body["down"] = down
    return JsonResponse(body, status=503 if down else 200)
