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
from registry.params import ECHO_LIMIT, BadParameter
from registry.runs.services import InvalidTransition


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Turn DRF, Django and SpecHub errors into the one shape; anything else stays a 500."""
    if isinstance(exc, RunError):
        http = status.HTTP_503_SERVICE_UNAVAILABLE if isinstance(exc, InfraError) else status.HTTP_422_UNPROCESSABLE_ENTITY
        return _error(exc.code, exc.message, {"fault": str(exc.fault)}, http)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
        message = f"The request body is over {limit:,} bytes. Send a large file as multipart form data (a `file` field)."
        return _error("too-large", message, {}, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, BadParameter):
        return _error("invalid-parameter", exc.reason, {exc.name: [exc.reason]}, status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, DjangoValidationError):
        return _error("invalid", " ".join(exc.messages), {}, status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, InvalidTransition):
        return _error("invalid-transition", str(exc), {}, status.HTTP_409_CONFLICT)
    if isinstance(exc, Http404):
        exc = NotFound()
    response = exception_handler(exc, context)
    if response is None or not isinstance(exc, APIException):
        return response
    long = _long_inputs(context.get("request"))
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else _one(codes) or "invalid"
    message = str(exc.detail) if isinstance(exc.detail, str) else _one(exc.detail) or "The request is invalid; see details."
    details = exc.detail if not isinstance(exc.detail, str) else {}
    response.data = {"error": {"code": code, "message": _clipped(message, long), "details": _clipped(details, long)}}
    return response


def _one(detail: object) -> str | None:
    """The reason of a refusal that has one and names no field (`{"detail": reason}`, as the worker API's): the
    message then says it, not "see details"."""
    found = detail.get("detail") if isinstance(detail, dict) and len(detail) == 1 else None
    found = found[0] if isinstance(found, list) and len(found) == 1 else found
    return str(found) if isinstance(found, str) else None


def _long_inputs(request: Any) -> list[str]:
    """What the request sent that is too long to quote whole: query values and the parsed body's strings."""
    sent: list[object] = [*getattr(request, "query_params", {}).values()]
    body = getattr(request, "_full_data", None)  # parsed already, or not at all: never parse again in here
    sent.extend(body.values() if isinstance(body, dict) else [])
    strings = [v for v in sent if isinstance(v, str)] + [x for v in sent if isinstance(v, list) for x in v if isinstance(x, str)]
    return sorted({v for v in strings if len(v) > ECHO_LIMIT}, key=len, reverse=True)


def _clipped(value: Any, long: list[str]) -> Any:
    """`value` with every long input it quotes cut to ECHO_LIMIT characters (DRF's own messages quote it whole)."""
    if isinstance(value, str):
        for text in long:
            value = value.replace(text, f"{text[:ECHO_LIMIT]}… ({len(text)} characters)")
        return value
    if isinstance(value, dict):
        return {key: _clipped(item, long) for key, item in value.items()}
    if isinstance(value, list):
        return [_clipped(item, long) for item in value]
    return value


def _error(code: str, message: str, details: dict[str, Any], status_code: int) -> Response:
    return Response({"error": {"code": code, "message": message, "details": details}}, status=status_code)
