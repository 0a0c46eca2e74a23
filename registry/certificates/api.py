"""The certificates' API: the registry's public key, a certificate's record and its signed file as issued."""

from __future__ import annotations

import base64
import json
from typing import Any, TypedDict

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers
from rest_framework.exceptions import APIException, NotFound
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel import certificates
from kernel.transparency import entries
from registry.api import serializers as s
from registry.certificates.revocation import MAX_REASON, AlreadyRevoked, RevocationNotQueued, certificate_revoke_request
from registry.certificates.selectors import level_as_bench_result, visible_certificates
from registry.certificates.services import verifying_key
from registry.models import (
    Certificate,
)
from registry.transparency.selectors import NotUnderCheckpoint, entry_for, entry_proof


class PublicKeyAnswer(TypedDict):
    algorithm: str
    key_id: str
    issuer: str
    public_key_pem: str


class PublicKeyOut(serializers.Serializer[PublicKeyAnswer]):
    algorithm = serializers.CharField()
    key_id = serializers.CharField()
    issuer = serializers.CharField(help_text="The `issuer` every certificate this key signs names (SPECHUB_PUBLIC_URL).")
    public_key_pem = serializers.CharField()


class PublicKey(APIView):
    """The Ed25519 public key that verifies this deployment's certificates, as PEM, and the issuer they name."""

    @extend_schema(responses=PublicKeyOut)
    def get(self, request: Request) -> Response:
        public = verifying_key()
        answer: PublicKeyAnswer = {
            "algorithm": certificates.ALGORITHM,
            "key_id": certificates.key_id(public),
            "issuer": settings.SPECHUB_PUBLIC_URL,
            "public_key_pem": certificates.public_key_pem(public),
        }
        return Response(PublicKeyOut(answer).data)


class CertificateDetail(generics.RetrieveAPIView[Certificate]):
    """One certificate's summary; `download` is the exact signed file."""

    serializer_class = s.CertificateOut

    def get_queryset(self) -> QuerySet[Certificate]:
        return visible_certificates(self.request.user)


class TheFileAsIs(BaseContentNegotiation):
    """The answer is the signed file, whatever the client's Accept asks for."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: Any, format_suffix: str | None = None) -> tuple[Any, str]:
        return renderers[0], renderers[0].media_type


class CertificateDownload(APIView):
    """The certificate file byte for byte: any re-rendering would break its signature. A private workload's
    certificate is its owner's, by session or by token."""

    content_negotiation_class = TheFileAsIs

    @extend_schema(responses={(200, "application/json"): OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> HttpResponse:
        certificate = get_object_or_404(visible_certificates(request.user), pk=pk)
        response = HttpResponse(certificate.document.encode(), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="spechub-certificate-{certificate.run_id}.json"'
        _log_headers(response, certificate.document.encode())
        return response


def _log_headers(response: HttpResponse, data: bytes) -> None:
    """Carry the file's place in the log beside it: the body stays the signed file, byte for byte."""
    entry = entry_for(certificate=entries.entry_sha256(data))
    if entry is None:
        return  # issued before the log
    try:
        inclusion = entry_proof(entry=entry)["inclusion"]
    except NotUnderCheckpoint:
        return  # the log changed under the registry: the client asks the log itself, and is told
    response["SpecHub-Log-Index"] = str(inclusion["index"])
    response["SpecHub-Log-Size"] = str(inclusion["size"])
    response["SpecHub-Log-Proof"] = ",".join(inclusion["proof"])
    response["SpecHub-Log-Checkpoint"] = base64.b64encode(inclusion["checkpoint"].encode()).decode()


class Conflict(APIException):
    status_code = 409
    default_code = "conflict"


class Revoked(APIException):
    status_code = 410
    default_code = "revoked"


class QueueUnavailable(APIException):
    status_code = 503
    default_code = "queue-unavailable"


class RevokeIn(serializers.Serializer[dict[str, str]]):
    reason = serializers.CharField(max_length=MAX_REASON, help_text="Why: shown on the pair page, in the API and in the log.")


class RevocationQueued(TypedDict):
    queued: bool
    certificate: int
    message: str
    status: str


class RevocationQueuedOut(serializers.Serializer[RevocationQueued]):
    queued = serializers.BooleanField()
    certificate = serializers.IntegerField()
    message = serializers.CharField()
    status = serializers.CharField(help_text="The certificate's record: `revoked_at` is set once the revocation is logged.")


class CertificateRevoke(APIView):
    """Revoke a certificate, with a reason: staff, or the owner of a certificate of their own workload. The
    revocation is appended to the transparency log; the certificate stays there too. 200 with the certificate where
    this server signs; 202 where a signing worker logs it, with where to see it done; 409 if it was revoked already."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=RevokeIn, responses={200: s.CertificateOut, 202: RevocationQueuedOut})
    def post(self, request: Request, pk: int) -> Response:
        get_object_or_404(visible_certificates(request.user), pk=pk)
        given = RevokeIn(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            certificate = certificate_revoke_request(certificate_id=pk, user=request.user, reason=given.validated_data["reason"])
        except AlreadyRevoked as revoked:
            raise Conflict(str(revoked)) from None
        except RevocationNotQueued as down:
            raise QueueUnavailable(str(down)) from None
        if certificate is None:
            where = request.build_absolute_uri(reverse("api-certificate", args=[pk]))
            queued: RevocationQueued = {"queued": True, "certificate": pk, "status": where,
                                        "message": f"The revocation is queued: a signing worker logs it shortly. {where} "
                                        "shows `revoked_at` and the reason once it is done."}  # fmt: skip
            return Response(RevocationQueuedOut(queued).data, status=202)
        return Response(s.CertificateOut(certificate, context={"request": request}).data)


class LevelDownload(APIView):
    """One certified concurrency level as the JSON `vllm bench serve --save-result` writes (its field names and
    meanings, only what the run measured), so a user can set their own run beside it with vLLM's tools."""

    content_negotiation_class = TheFileAsIs

    @extend_schema(responses={(200, "application/json"): OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int, concurrency: int) -> HttpResponse:
        certificate = get_object_or_404(visible_certificates(request.user).select_related("run__pair__verifier"), pk=pk)
        if certificate.revoked_at is not None:  # a revoked run is no reference for anything, a user's own run included
            raise Revoked(f"Certificate {pk} was revoked on {certificate.revoked_at:%Y-%m-%d} "
                          f"({certificate.revocation_reason[:200]}): its figures are no reference. Hold your run to "
                          f"the pair's newest unrevoked certificate.")  # fmt: skip
        written = level_as_bench_result(certificate=certificate, concurrency=concurrency)
        if written is None:
            raise NotFound(f"Certificate {pk}'s run measured no concurrency {concurrency}.")
        response = HttpResponse(json.dumps(written, indent=2).encode(), content_type="application/json")
        name = f"spechub-{certificate.run_id}-c{concurrency}.json"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
