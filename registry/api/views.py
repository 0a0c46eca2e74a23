"""API views: each reads through selectors or writes through one service."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, status
from rest_framework.exceptions import NotFound, PermissionDenied, Throttled
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from kernel import certificates
from registry.api import serializers as s
from registry.api.pagination import IdsFirstPagination
from registry.api.renderers import CsvRenderer
from registry.api.throttles import SubmissionQuota
from registry.filters import PairFilter
from registry.models import Certificate, CertificationRun, HubModel, Pair
from registry.params import echo
from registry.selectors import (
    compatibility_matrix,
    engine_qualifications,
    export_rows,
    pairs_list,
    qualification_by_digest,
    recommendations,
    webhooks_of,
)
from registry.services.certificates import verifying_key
from registry.services.gate import gate_report_cached
from registry.services.notifications import webhook_endpoint_create, webhook_endpoint_delete
from registry.services.runs import run_cancel, run_create
from registry.services.submissions import SubmissionQuotaExceeded, submission_create


class ModelList(generics.ListAPIView[HubModel]):
    """Pinned Hub models in the catalog."""

    serializer_class = s.HubModelOut
    queryset = HubModel.objects.order_by("repo_id", "sha")


class PairList(generics.ListAPIView[Pair]):
    """Pairs with the catalog's filters (q, family, verifier, method, verdict, hardware, engine_version,
    min_speedup) and sorts (sort=newest|speedup|al)."""

    serializer_class = s.PairOut
    pagination_class = IdsFirstPagination
    filter_backends = [DjangoFilterBackend]
    filterset_class = PairFilter
    queryset = pairs_list()


class PairDetail(generics.RetrieveAPIView[Pair]):
    """One pair with its compatibility report and its latest run's results."""

    serializer_class = s.PairDetailOut
    queryset = Pair.objects.select_related("verifier", "draft")


class RunList(generics.ListAPIView[CertificationRun]):
    serializer_class = s.RunOut

    def get_queryset(self) -> QuerySet[CertificationRun]:
        runs = CertificationRun.objects.visible_to(self.request.user)
        return runs.prefetch_related("results").order_by("-created_at", "-id")


class RunDetail(generics.RetrieveAPIView[CertificationRun]):
    serializer_class = s.RunOut

    def get_queryset(self) -> QuerySet[CertificationRun]:
        return CertificationRun.objects.visible_to(self.request.user).prefetch_related("results")


class EngineList(APIView):
    """Each engine build's newest qualification on each hardware class and dtype: its controls and their outcomes."""

    @extend_schema(responses=s.EngineQualificationOut(many=True))
    def get(self, request: Request) -> Response:
        return Response(s.EngineQualificationOut(engine_qualifications(), many=True).data)


class EngineDetail(APIView):
    """One qualification record, whole: every control's tests with their statistics, p-values and power."""

    @extend_schema(responses=dict[str, Any])
    def get(self, request: Request, digest: str) -> Response:
        row = qualification_by_digest(digest=digest)
        if row is None:
            raise NotFound(f"No engine qualification has digest {echo(digest)}; /api/v1/engines/ lists them.")
        return Response(row.document)


class RunCancel(APIView):
    """Cancel a run: its requester or staff only."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses=s.RunOut)
    def post(self, request: Request, pk: int) -> Response:
        run = generics.get_object_or_404(CertificationRun.objects.visible_to(request.user), pk=pk)
        if not (request.user.is_staff or run.requested_by_id == request.user.pk):
            raise PermissionDenied("Only the user who requested this run, or staff, may cancel it.")
        return Response(s.RunOut(run_cancel(run_id=run.pk)).data)


class PairRecertify(APIView):
    """Staff only: queue a new certification of a pair."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=None, responses={201: s.RunOut})
    def post(self, request: Request, pk: int) -> Response:
        pair = generics.get_object_or_404(Pair, pk=pk)
        run = run_create(pair=pair, hardware=request.query_params.get("hardware", "cpu"), requested_by=request.user)
        return Response(s.RunOut(run).data, status=status.HTTP_201_CREATED)


class Compatibility(APIView):
    """GET: the verifiers-by-drafts matrix. POST: the gate's verdict for two repos, creating nothing."""

    throttle_scope = "compatibility"

    def get_throttles(self) -> list[BaseThrottle]:
        # Only the verdict reads the Hub inside the request; the matrix is one database read.
        return super().get_throttles() if self.request.method == "POST" else []

    @extend_schema(responses=dict[str, Any])
    def get(self, request: Request) -> Response:
        return Response(compatibility_matrix())

    @extend_schema(request=s.CompatibilityIn, responses=dict[str, Any])
    def post(self, request: Request) -> Response:
        given = s.CompatibilityIn(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        report = gate_report_cached(
            verifier=data["verifier"],
            verifier_revision=data["verifier_revision"],
            draft=data.get("draft") or None,
            draft_revision=data["draft_revision"],
            method=data.get("method"),
            k=data.get("num_speculative_tokens"),
        )
        return Response(report)


class Recommendations(APIView):
    """The best draft for a verifier on a hardware class, at a concurrency, optionally for one workload."""

    @extend_schema(parameters=[s.RecommendationIn], responses=dict[str, Any])
    def get(self, request: Request) -> Response:
        given = s.RecommendationIn(data=request.query_params)
        given.is_valid(raise_exception=True)
        ranked = recommendations(**given.validated_data)
        best = next((r for r in ranked if r["verdict"] == "certified"), None)
        return Response({"query": given.validated_data, "best": best, "ranked": ranked})


class Export(APIView):
    """Every pair with its latest certification, as CSV or JSON (`?format=csv|json`)."""

    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(responses=dict[str, Any])
    def get(self, request: Request) -> Response:
        return Response(export_rows())


class SubmissionCreate(APIView):
    """Submit a draft: the gate's verdict comes back at once, and the run id when a run was queued."""

    permission_classes = [permissions.IsAuthenticated]
    throttle_classes = [SubmissionQuota]

    @extend_schema(request=s.SubmissionIn, responses={201: s.SubmissionOut, 200: s.SubmissionOut})
    def post(self, request: Request) -> Response:
        given = s.SubmissionIn(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            submission = submission_create(
                user=request.user,
                repo_id=data["repo_id"],
                revision=data["revision"],
                verifier_repo_id=data["verifier_repo_id"],
                verifier_revision=data["verifier_revision"],
                method=data.get("method"),
                num_speculative_tokens=data.get("num_speculative_tokens"),
            )
        except SubmissionQuotaExceeded as spent:
            raise Throttled(wait=SubmissionQuota.seconds_until_a_slot_frees(request.user), detail=str(spent)) from None
        created = submission.status == "accepted"
        return Response(s.SubmissionOut(submission).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class PublicKey(APIView):
    """The Ed25519 public key that verifies this deployment's certificates, as PEM, and the issuer they name."""

    @extend_schema(responses=s.PublicKeyOut)
    def get(self, request: Request) -> Response:
        public = verifying_key()
        body = {"algorithm": certificates.ALGORITHM, "key_id": certificates.key_id(public), "issuer": settings.SPECHUB_PUBLIC_URL}
        return Response({**body, "public_key_pem": certificates.public_key_pem(public)})


class CertificateDetail(generics.RetrieveAPIView[Certificate]):
    """One certificate's summary; `download` is the exact signed file."""

    serializer_class = s.CertificateOut

    def get_queryset(self) -> QuerySet[Certificate]:
        return visible_certificates(self.request.user)


def visible_certificates(user: Any) -> QuerySet[Certificate]:
    """Certificates of the runs `user` may see: a private workload's are its owner's (and staff's)."""
    return Certificate.objects.filter(run__in=CertificationRun.objects.visible_to(user))


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


class Webhooks(APIView):
    """Your webhook endpoints. Events about pairs you submitted are POSTed there, HMAC-signed with the secret."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses=s.WebhookOut(many=True))
    def get(self, request: Request) -> Response:
        return Response(s.WebhookOut(webhooks_of(owner=request.user), many=True).data)

    @extend_schema(request=s.WebhookIn, responses={201: s.WebhookCreatedOut})
    def post(self, request: Request) -> Response:
        given = s.WebhookIn(data=request.data)
        given.is_valid(raise_exception=True)
        endpoint = webhook_endpoint_create(owner=request.user, **given.validated_data)
        return Response(s.WebhookCreatedOut(endpoint).data, status=status.HTTP_201_CREATED)


class WebhookDelete(APIView):
    """Remove one of your webhook endpoints; its pending deliveries go with it."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        endpoint = generics.get_object_or_404(webhooks_of(owner=request.user), pk=pk)
        webhook_endpoint_delete(endpoint=endpoint)
        return Response(status=status.HTTP_204_NO_CONTENT)
