"""Errors every page shares: a database outage is a 503 with Retry-After, never a 500 page; a bad parameter, the 400
page with its reason.

PostgreSQL restarting (a failover, an upgrade) drops every connection; requests in that window
fail with OperationalError or InterfaceError. Django's connection health checks reconnect on
the next request, so the honest answer meanwhile is "try again shortly".
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from registry.params import BadParameter

logger = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 5


class DatabaseOutage:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        logger.warning("database unavailable for %s %s: %s", request.method, request.path, exception)
        message = "The database is unavailable for a moment; try again shortly. Nothing was stored by this request."
        response = JsonResponse({"error": {"code": "database-unavailable", "message": message, "details": {}}}, status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


class BadParameterPage:
    """A page's parameter that is not what it must be is the 400 page with the reason, DEBUG on or off (handler400
    serves it only with DEBUG off; Django's own debug page for a 400 runs inline script the CSP blocks). The API's
    views answer in JSON before this sees anything (registry/api/errors.py)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, BadParameter):
            return None
        return render(request, "registry/bad_request.html", {"reason": str(exception)}, status=400)
