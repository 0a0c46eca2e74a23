"""The transparency log's API: the latest signed checkpoint, inclusion and consistency proofs, and the entries.

All are public: the log is how anyone checks the registry, so it answers everyone the same. An entry is
asked for by its certificate file's SHA-256 (what a holder of the file can compute), or by a certificate's id
when the asker may see that certificate. The entries are served in order for a monitor (`spechub log watch`) to
read every revocation; a private workload's certificate is withheld there, as it is everywhere else.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import APIException, NotFound
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel.transparency import entries, note
from registry.api.shapes import shape
from registry.certificates.selectors import visible_certificates
from registry.certificates.services import verifying_key
from registry.params import BadParameter, echo, whole_number
from registry.transparency.selectors import (
    LogTree,
    NotUnderCheckpoint,
    entry_for,
    entry_proof,
    log_checkpoint,
    log_entries,
    log_tree,
)

_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


class CheckpointAnswer(TypedDict):
    """The latest signed checkpoint, a C2SP tlog-checkpoint note; `size` and `origin` repeat what it says."""

    origin: str
    size: int
    checkpoint: str
    verifier_key: str  # the note verifier key witnesses configure: <origin>+<key id>+<base64 of 0x01 and the key>


class Conflict(APIException):
    status_code = 409
    default_code = "log:not-under-checkpoint"


class _PlainOrJson(BaseContentNegotiation):
    """JSON, or the note alone for a client that asks for text/plain: the view answers either itself."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: Any, format_suffix: str | None = None) -> tuple[Any, str]:
        return renderers[0], renderers[0].media_type


class Checkpoint(APIView):
    """The log's latest checkpoint: a C2SP signed note. With `Accept: text/plain`, the note alone, as witnesses read it."""

    content_negotiation_class = _PlainOrJson

    @extend_schema(responses={200: shape(CheckpointAnswer)})
    def get(self, request: Request) -> Response | HttpResponse:
        signed = log_checkpoint()
        if not signed:
            raise NotFound("The log is empty: no certificate has been signed yet.")
        if "text/plain" in request.headers.get("Accept", ""):
            return HttpResponse(signed.encode(), content_type="text/plain; charset=utf-8")
        lines = signed.split("\n")
        verifier = note.verifier_key(lines[0], verifying_key())
        answer: CheckpointAnswer = {"origin": lines[0], "size": int(lines[1]), "checkpoint": signed, "verifier_key": verifier}
        return Response(answer)


def _certificate_parameter(request: Request) -> str:
    given = request.query_params.get("certificate", "")
    if _SHA256.fullmatch(given) or re.fullmatch(r"[0-9]{1,18}", given):
        return given
    raise BadParameter(
        "certificate", f"{echo(given)} is neither a certificate id nor a certificate file's SHA-256 (64 hex digits)."
    )


class InclusionProof(APIView):
    """An entry's inclusion proof against the latest checkpoint (or the one of `size`), and its revocation, if any."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "certificate", OpenApiTypes.STR, required=True, description="The certificate file's SHA-256, or its id."
            ),
            OpenApiParameter("size", OpenApiTypes.INT, description="A log size to prove against (default: the latest)."),
        ],
        responses={200: shape(entries.EntryProof)},
    )
    def get(self, request: Request) -> Response:
        asked = _certificate_parameter(request)
        entry = entry_for(certificate=asked)
        if entry is None or (asked.isdigit() and not visible_certificates(request.user).filter(pk=entry.certificate_id).exists()):
            raise NotFound(f"No certificate {asked} in the log.")
        try:
            answer = entry_proof(entry=entry)
        except NotUnderCheckpoint as missing:
            raise Conflict(str(missing)) from None
        size = request.query_params.get("size")
        latest = answer["inclusion"]["size"]
        if size not in (None, ""):
            wanted = whole_number(size, name="size", low=1, high=latest)
            answer = _at_size(answer, entry_index=answer["inclusion"]["index"], size=wanted)
        return Response(answer)


def _at_size(answer: entries.EntryProof, *, entry_index: int, size: int) -> entries.EntryProof:
    if entry_index >= size:
        raise BadParameter("size", f"the entry is at index {entry_index}, after a log of size {size}; ask for a larger size.")
    tree = log_tree().tree
    proof = entries.encoded(tree.inclusion_proof(entry_index, size))
    inclusion: entries.InclusionProof = {**answer["inclusion"], "size": size, "proof": proof, "checkpoint": ""}
    return {**answer, "inclusion": inclusion, "revocation": None}


class ConsistencyProof(APIView):
    """The proof that the log of size `to` (default: the latest) extends the log of size `from`."""

    @extend_schema(
        parameters=[
            OpenApiParameter("from", OpenApiTypes.INT, required=True),
            OpenApiParameter("to", OpenApiTypes.INT, description="default: the latest checkpoint's size"),
        ],
        responses={200: shape(entries.ConsistencyProof)},
    )
    def get(self, request: Request) -> Response:
        logged = log_tree()
        signed, tree = logged.checkpoint, logged.tree
        latest = _latest_size(logged)
        to = whole_number(request.query_params.get("to"), name="to", low=1, high=max(latest, 1), default=latest)
        start = whole_number(request.query_params.get("from"), name="from", low=1, high=to)
        if latest == 0:
            raise NotFound("The log is empty: no certificate has been signed yet.")
        answer: entries.ConsistencyProof = {
            "from_size": start,
            "to_size": to,
            "proof": entries.encoded(tree.consistency_proof(start, to)),
            "checkpoint": signed,
        }
        return Response(answer)


class Entries(APIView):
    """The log's entries from `start` to `end` - 1 (default: the latest checkpoint's size), in order, at most
    100 a page: each entry's bytes in base64, for a monitor to hold to a checkpoint's root and read revocations from."""

    @extend_schema(
        parameters=[
            OpenApiParameter("start", OpenApiTypes.INT, required=True, description="The first entry's place, from 0."),
            OpenApiParameter("end", OpenApiTypes.INT, description="One past the last (default: the latest checkpoint's size)."),
        ],
        responses={200: shape(entries.EntryPage)},
    )
    def get(self, request: Request) -> Response:
        latest = _latest_size(log_tree())
        if latest == 0:
            raise NotFound("The log is empty: no certificate has been signed yet.")
        end = whole_number(request.query_params.get("end"), name="end", low=1, high=latest, default=latest)
        start = whole_number(request.query_params.get("start"), name="start", low=0, high=end - 1)
        answer: entries.EntryPage = {"start": start, "entries": log_entries(start=start, end=end)}
        return Response(answer)


def _latest_size(logged: LogTree) -> int:
    """The size of the log the latest checkpoint signed, as far as the tree holds it (0 before the first entry)."""
    return min(int(logged.checkpoint.split("\n")[1]) if logged.checkpoint else 0, logged.tree.size)
