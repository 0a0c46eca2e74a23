"""Request bodies: refused by their declared size before a byte is read, and spooled under a name the disk takes.

Django spools a multipart file to a temporary file as it reads it, and only then does the view see it: a 100 MB
anonymous body made a 104 MB file before anything refused it. The largest body SpecHub takes is a workload
upload (SPECHUB_WORKLOAD_MAX_BYTES, plus room for the form's other fields); a larger declared length is a 413 at
once, and a chunked body that passes it is stopped by the upload handler as it streams.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler
from django.http import HttpRequest, HttpResponse, JsonResponse

FORM_ROOM = 64 * 1024  # the multipart boundaries and the form's other fields


def body_limit() -> int:
    return int(settings.SPECHUB_WORKLOAD_MAX_BYTES) + FORM_ROOM


class BodyLimit:
    """Middleware: a declared body over the limit is a 413 with the reason, before Django reads it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0  # Django refuses a malformed length itself
        if declared > body_limit():
            message = (
                f"The request body is {declared:,} bytes, over the {body_limit():,} SpecHub takes; a workload upload "
                f"may be {settings.SPECHUB_WORKLOAD_MAX_BYTES:,} bytes (sample your traffic first)."
            )
            return JsonResponse({"error": {"code": "too-large", "message": message, "details": {}}}, status=413)
        return self.get_response(request)


class BoundedTemporaryFileUploadHandler(TemporaryFileUploadHandler):
    """Django's spooling handler, with the file's name cut to what a file system takes (a 250-character extension
    failed with 'File name too long') and the spooled bytes bounded for a body that declared no length."""

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        stem, extension = os.path.splitext(file_name)
        self.spooled = 0
        super().new_file(field_name, stem[:100] + extension[:16], *args, **kwargs)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.spooled += len(raw_data)
        if self.spooled > body_limit():
            raise StopUpload(connection_reset=True)
        return super().receive_data_chunk(raw_data, start)
