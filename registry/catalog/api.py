"""The catalog's API: models, pairs, the gate on demand, recommendations and the export."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from django.db.models import Prefetch
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import generics, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from kernel.formats import ReportDict
from kernel.formats.vllm_support import MAX_SPECULATIVE_TOKENS, METHOD_CHOICES
from registry.api.pagination import IdsFirstPagination
from registry.api.renderers import CsvRenderer
from registry.api.serializers import ID_LENGTH, CertificateOut, RegressionOut, RunOut
from registry.api.shapes import shape
from registry.catalog.filters import PairFilter
from registry.catalog.formats import FormatMatrix, format_matrix
from registry.catalog.gate import gate_report_cached
from registry.catalog.selectors import (
    ExportRow,
    Matrix,
    Recommendation,
    compatibility_matrix,
    export_rows,
    pairs_listed,
    recommendations,
)
from registry.models import (
    HubModel,
    Pair,
    Regression,
    WorkloadCategory,
)
from registry.params import WholeNumberField
from registry.validation import validate_repo_id, validate_revision


class HubModelOut(serializers.ModelSerializer[HubModel]):
    class Meta:
        model = HubModel
        fields = [
            "id",
            "repo_id",
            "sha",
            "role",
            "architecture",
            "family",
            "parameter_count",
            "dtype",
            "license",
            "tokenizer_hash",
        ]


class PairOut(serializers.ModelSerializer[Pair]):
    verifier = HubModelOut(read_only=True)
    draft = HubModelOut(read_only=True, allow_null=True)

    class Meta:
        model = Pair
        fields = [
            "id", "verifier", "draft", "method", "num_speculative_tokens", "options", "created_at",
            "verdict", "speedup", "mean_acceptance_length", "hardware", "engine_version", "latest_run", "regressed",
        ]  # fmt: skip


# PairOut read straight off the row, for the pair list: DRF's per-field path costs ~3 ms for a page of 25 pairs and
# their two models (34 fields each), a quarter of the request. The pair list's tests hold the two equal; the schema
# (a comment, not a docstring, keeps it out) names it as PairOut, the shape it writes.
@extend_schema_serializer(component_name="PairOut")
class PairListOut(PairOut):
    def to_representation(self, pair: Pair) -> dict[str, Any]:
        return {
            "id": pair.pk, "verifier": _model_row(pair.verifier), "draft": _model_row(pair.draft) if pair.draft else None,
            "method": pair.method, "num_speculative_tokens": pair.num_speculative_tokens, "options": pair.options,
            "created_at": CREATED_AT.to_representation(pair.created_at), "verdict": pair.verdict, "speedup": pair.speedup,
            "mean_acceptance_length": pair.mean_acceptance_length, "hardware": pair.hardware,
            "engine_version": pair.engine_version, "latest_run": pair.latest_run_id, "regressed": pair.regressed,
        }  # fmt: skip


CREATED_AT = serializers.DateTimeField()  # DRF's own formatting, time zone and all


def _model_row(model: HubModel) -> dict[str, Any]:
    return {name: getattr(model, name) for name in HubModelOut.Meta.fields}


class PairDetailOut(PairOut):
    latest_run = serializers.SerializerMethodField()
    certificate = serializers.SerializerMethodField()
    regressions = RegressionOut(many=True, read_only=True)

    class Meta(PairOut.Meta):
        fields = [*PairOut.Meta.fields, "compatibility", "format_metadata", "latest_run", "certificate", "regressions"]

    @extend_schema_field(RunOut(allow_null=True))
    def get_latest_run(self, pair: Pair) -> Mapping[str, object] | None:
        run = pair.runs.public().order_by("-created_at", "-id").first()
        return RunOut(run).data if run else None

    @extend_schema_field(CertificateOut(allow_null=True))
    def get_certificate(self, pair: Pair) -> Mapping[str, object] | None:
        certificate = pair.certificates.filter(run__workload__isnull=True).first()
        return CertificateOut(certificate).data if certificate else None


class CompatibilityQuery(TypedDict):
    draft: NotRequired[str]
    draft_revision: str
    verifier: str
    verifier_revision: str
    method: NotRequired[str]
    num_speculative_tokens: NotRequired[int]


class CompatibilityIn(serializers.Serializer[CompatibilityQuery]):
    draft = serializers.CharField(required=False, allow_blank=True, max_length=ID_LENGTH, validators=[validate_repo_id])
    draft_revision = serializers.CharField(default="main", max_length=ID_LENGTH, validators=[validate_revision])
    verifier = serializers.CharField(max_length=ID_LENGTH, validators=[validate_repo_id])
    verifier_revision = serializers.CharField(default="main", max_length=ID_LENGTH, validators=[validate_revision])
    method = serializers.ChoiceField(choices=METHOD_CHOICES, required=False)
    num_speculative_tokens = WholeNumberField(required=False, min_value=1, max_value=MAX_SPECULATIVE_TOKENS)


class RecommendationQuery(TypedDict):
    verifier: str
    hardware: str
    concurrency: int
    workload: str  # a workload category, or "" for the suite-wide figure


class Recommended(TypedDict):
    """The certified pair to run (null when none is certified), and every measured pair, certified ones first."""

    query: RecommendationQuery
    best: Recommendation | None
    ranked: list[Recommendation]


class RecommendationIn(serializers.Serializer[RecommendationQuery]):
    verifier = serializers.CharField(max_length=ID_LENGTH, validators=[validate_repo_id])
    hardware = serializers.CharField(default="cpu", max_length=32)
    concurrency = WholeNumberField(default=1, min_value=1, max_value=1024)
    workload = serializers.ChoiceField(choices=WorkloadCategory.choices, required=False, default="")


class ModelList(generics.ListAPIView[HubModel]):
    """Pinned Hub models in the catalog."""

    serializer_class = HubModelOut
    queryset = HubModel.objects.order_by("repo_id", "sha")


class PairPages(IdsFirstPagination):
    # A substring search leaves few pairs, anywhere in the sort order, and its trigram index counts none without
    # reading each row.
    one_pass_params = ("q",)


class PairList(generics.ListAPIView[Pair]):
    """Pairs with the catalog's filters (q, family, verifier, method, verdict, hardware, engine_version,
    min_speedup) and sorts (sort=newest|speedup|al). `count` is exact up to 10,000 matches; past that
    `count_exact` is false and `count` is a lower bound."""

    serializer_class = PairListOut
    pagination_class = PairPages
    filter_backends = [DjangoFilterBackend]
    filterset_class = PairFilter
    queryset = pairs_listed()


class PairDetail(generics.RetrieveAPIView[Pair]):
    """One pair with its compatibility report and its latest run's results."""

    serializer_class = PairDetailOut
    # Each regression's detectable drop reads its run's hardware: one query for all of them, not one each.
    queryset = Pair.objects.select_related("verifier", "draft").prefetch_related(
        Prefetch("regressions", queryset=Regression.objects.select_related("run"))
    )


class Compatibility(APIView):
    """GET: the verifiers-by-drafts matrix. POST: the gate's verdict for two repos, creating nothing."""

    throttle_scope = "compatibility"

    def get_throttles(self) -> list[BaseThrottle]:
        # Only the verdict reads the Hub inside the request; the matrix is one database read.
        return super().get_throttles() if self.request.method == "POST" else []

    @extend_schema(responses={200: shape(Matrix)})
    def get(self, request: Request) -> Response:
        return Response(compatibility_matrix())

    @extend_schema(request=CompatibilityIn, responses={200: shape(ReportDict)})
    def post(self, request: Request) -> Response:
        given = CompatibilityIn(data=request.data)
        given.is_valid(raise_exception=True)
        data: CompatibilityQuery = given.validated_data
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

    @extend_schema(parameters=[RecommendationIn], responses={200: shape(Recommended)})
    def get(self, request: Request) -> Response:
        given = RecommendationIn(data=request.query_params)
        given.is_valid(raise_exception=True)
        query: RecommendationQuery = given.validated_data
        ranked = recommendations(**query)
        best = next((r for r in ranked if r["verdict"] == "certified"), None)
        answer: Recommended = {"query": query, "best": best, "ranked": ranked}
        return Response(answer)


class Export(APIView):
    """Every pair with its latest certification, as CSV or JSON (`?format=csv|json`)."""

    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(responses=list[ExportRow])
    def get(self, request: Request) -> Response:
        return Response(export_rows())


class FormatMatrixView(APIView):
    """Each draft format SpecHub knows against each engine build the registry has qualified: loads, refused (the gate's
    reason), certified (how many pairs) or failed (the fault), from the gate's tables and real outcomes."""

    @extend_schema(responses={200: shape(FormatMatrix)})
    def get(self, request: Request) -> Response:
        return Response(format_matrix())
