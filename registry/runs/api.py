"""The runs' API: runs, their cancelling, re-certifying a pair, submissions, and engine builds' qualifications."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, permissions, serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, Throttled
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel.formats.vllm_support import MAX_SPECULATIVE_TOKENS, METHOD_CHOICES
from kernel.qualification import Record
from registry.api import serializers as s
from registry.api.serializers import ID_LENGTH
from registry.api.shapes import shape
from registry.api.throttles import SubmissionQuota
from registry.models import (
    CertificationRun,
    EngineQualification,
    Pair,
    Submission,
)
from registry.params import WholeNumberField, echo
from registry.runs.engines import (
    ControlSummary,
    control_summary,
    engine_qualifications,
    qualification_by_digest,
    record_of,
)
from registry.runs.services import run_cancel, run_create
from registry.runs.submissions import SubmissionQuotaExceeded, submission_create
from registry.validation import validate_repo_id, validate_revision


class ControlOut(serializers.Serializer[ControlSummary]):
    name = serializers.CharField()
    method = serializers.CharField(allow_null=True)
    draft = serializers.CharField(allow_null=True)
    outcome = serializers.CharField(help_text="pass, fail, or not-supported (the engine refused it)")
    summary = serializers.CharField()


class EngineQualificationOut(serializers.ModelSerializer[EngineQualification]):
    controls = serializers.SerializerMethodField()
    record = serializers.SerializerMethodField()

    class Meta:
        model = EngineQualification
        fields = ["engine", "engine_build", "hardware", "dtype", "digest", "passed", "failing", "created_at", "controls",
                  "record"]  # fmt: skip

    @extend_schema_field(ControlOut(many=True))
    def get_controls(self, row: EngineQualification) -> list[ControlSummary]:
        return [control_summary(control) for control in record_of(row)["controls"]]

    def get_record(self, row: EngineQualification) -> str:
        """The whole record, with every test's statistic, p-value and power."""
        return reverse("api-engine", args=[row.digest])


class SubmissionFields(TypedDict):
    repo_id: str
    revision: str
    verifier_repo_id: str
    verifier_revision: str
    method: NotRequired[str]
    num_speculative_tokens: NotRequired[int]


class SubmissionIn(serializers.Serializer[SubmissionFields]):
    repo_id = serializers.CharField(max_length=ID_LENGTH, validators=[validate_repo_id])
    revision = serializers.CharField(default="main", max_length=ID_LENGTH, validators=[validate_revision])
    verifier_repo_id = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=ID_LENGTH, validators=[validate_repo_id]
    )
    verifier_revision = serializers.CharField(default="main", max_length=ID_LENGTH, validators=[validate_revision])
    method = serializers.ChoiceField(choices=METHOD_CHOICES, required=False)
    num_speculative_tokens = WholeNumberField(required=False, min_value=1, max_value=MAX_SPECULATIVE_TOKENS)


class SubmissionOut(serializers.ModelSerializer[Submission]):
    class Meta:
        model = Submission
        fields = [
            "id", "repo_id", "revision", "verifier_repo_id", "verifier_revision", "status", "refusal_code",
            "refusal_message", "validation_report", "pair", "run", "created_at",
        ]  # fmt: skip


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

    @extend_schema(responses=EngineQualificationOut(many=True))
    def get(self, request: Request) -> Response:
        return Response(EngineQualificationOut(engine_qualifications(), many=True).data)


class EngineDetail(APIView):
    """One qualification record, whole: every control's tests with their statistics, p-values and power."""

    @extend_schema(responses={200: shape(Record)})
    def get(self, request: Request, digest: str) -> Response:
        row = qualification_by_digest(digest=digest, user=request.user)  # a self-hosted record: its owner's and staff's
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


class SubmissionCreate(APIView):
    """Submit a draft: the gate's verdict comes back at once, and the run id when a run was queued."""

    permission_classes = [permissions.IsAuthenticated]
    throttle_classes = [SubmissionQuota]

    @extend_schema(request=SubmissionIn, responses={201: SubmissionOut, 200: SubmissionOut})
    def post(self, request: Request) -> Response:
        given = SubmissionIn(data=request.data)
        given.is_valid(raise_exception=True)
        data: SubmissionFields = given.validated_data
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
        return Response(SubmissionOut(submission).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
