"""The certificates' API: the registry's public key, a certificate's record and its signed file as issued."""

from __future__ import annotations

from typing import Any, TypedDict

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel import certificates
from registry.api import serializers as s
from registry.certificates.selectors import visible_certificates
from registry.certificates.services import verifying_key
from registry.models import (
    Certificate,
)


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
        return response
