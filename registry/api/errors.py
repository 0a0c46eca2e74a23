"""One error shape for every API failure: {"error": {"code", "message", "details"}}."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import status
from rest_framework.exceptions import APIException, NotFound
from rest_framework.response import Response
from rest_framework.views import exception_handler

from kernel.errors import InfraError, RunError
from registry.services.runs import InvalidTransition


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Turn DRF, Django and SpecHub errors into the one shape; anything else stays a 500."""
    if isinstance(exc, RunError):
        http = status.HTTP_503_SERVICE_UNAVAILABLE if isinstance(exc, InfraError) else status.HTTP_422_UNPROCESSABLE_ENTITY
        return _error(exc.code, exc.message, {"fault": str(exc.fault)}, http)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
        message = f"The request body is over {limit:,} bytes. Send a large file as multipart form data (a `file` field)."
        return _error("too-large", message, {}, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DjangoValidationError):
        return _error("invalid", " ".join(exc.messages), {}, status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, InvalidTransition):
        return _error("invalid-transition", str(exc), {}, status.HTTP_409_CONFLICT)
    if isinstance(exc, Http404):
        exc = NotFound()
    response = exception_handler(exc, context)
    if response is None or not isinstance(exc, APIException):
        return response
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else "invalid"
    message = str(exc.detail) if isinstance(exc.detail, str) else "The request is invalid; see details."
    details = exc.detail if not isinstance(exc.detail, str) else {}
    response.data = {"error": {"code": code, "message": message, "details": details}}
    return response


def _error(code: str, message: str, details: dict[str, Any], status_code: int) -> Response:
    return Response({"error": {"code": code, "message": message, "details": details}}, status=status_code)
