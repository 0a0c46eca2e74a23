"""What every page shares, and the house's own pages: the page parameter, the 400 page, liveness and readiness.

Each domain's pages are in its folder (registry/<domain>/views.py): they parse the request, call a selector, and render."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from registry.health import readiness
from registry.params import BadParameter, whole_number

PAGE_SIZE = 25


def page_number(request: HttpRequest) -> int:
    """The `page` asked for; past the last page, Paginator.get_page gives the last."""
    return whole_number(request.GET.get("page"), name="page", high=10**9, default=1)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 400 page (handler400): a parameter's reason where there is one, never the text of another exception."""
    reason = str(exception) if isinstance(exception, BadParameter) else "The request was malformed."
    return render(request, "registry/bad_request.html", {"reason": reason}, status=400)


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
