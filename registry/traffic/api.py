"""The API of users' own traffic: upload, list, read, delete, certify on, compare, export.

A workload is its owner's (and staff's): anyone else gets a 404 on every endpoint, as if it did not exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, NotRequired, TypedDict

from django.core.files.uploadedfile import UploadedFile
from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel import result
from kernel.traffic import CHUNK
from registry.api.parsers import JSONParser
from registry.api.serializers import RunOut, acceptance_out
from registry.api.shapes import shape
from registry.models import Pair, Workload
from registry.params import echo, whole_number
from registry.runs.selectors import PropertyRow
from registry.traffic.report import AtCategory, AtConcurrency, Candidate, Report, notes, workload_report
from registry.traffic.selectors import bench_command, export_lines, sample_line, workload_candidates, workload_for, workloads_of
from registry.traffic.services import workload_certify, workload_create, workload_delete

MAX_CONCURRENCY = 4096


class WorkloadOut(serializers.ModelSerializer[Workload]):
    verifier = serializers.CharField(source="verifier.repo_id")
    verifier_sha = serializers.CharField(source="verifier.sha")
    sampled = serializers.IntegerField()
    measured = serializers.SerializerMethodField()

    class Meta:
        model = Workload
        fields = ["id", "name", "verifier", "verifier_sha", "sha256", "format", "total_requests", "unique_requests",
                  "sampled", "seed", "size_bytes", "categories", "measured", "created_at", "deleted_at"]  # fmt: skip

    def get_measured(self, workload: Workload) -> str:
        """What a run measures of the upload: '200 of your 10,000 requests, seed 0'."""
        return sample_line(workload)


class SuiteFigures(TypedDict):
    run: int
    acceptance: dict[str, object] | None  # acceptance_out's naming of the document's figures
    speed_c1: result.SpeedAtLevel | None


class BreakEven(TypedDict):
    faster_up_to: int | None
    slower_from: int | None


class CandidateJson(TypedDict):
    """One draft measured on the workload, beside the same pair's figures on the public suite."""

    pair: int
    draft: str
    method: str
    run: int
    acceptance: dict[str, object] | None  # acceptance_out's naming of the document's figures
    by_category: list[AtCategory]  # AL by the workload's categories, as uploaded (SPEED-Bench's carry over)
    speed: list[result.SpeedAtLevel]
    break_even: BreakEven
    properties: list[PropertyRow]
    equivalent: bool
    at_concurrency: AtConcurrency | None
    public_suite: SuiteFigures | None
    serve: str | None


class RecommendationJson(TypedDict):
    pair: int | None  # None: serve the verifier alone; the reason says why
    reason: str


class ExportCommand(TypedDict):
    command: str


class ReportJson(TypedDict):
    workload: Annotated[dict[str, object], WorkloadOut]
    concurrency: int
    hardware: str | None
    measured_levels: list[int]
    candidates: list[CandidateJson]
    running: list[int]
    recommendation: RecommendationJson | None  # None when nothing ran
    export: ExportCommand
    notes: list[str]  # how the upload was read, where a reader must know (SPEED-Bench: the first turn only)


class WorkloadFields(TypedDict):
    name: str
    verifier: str
    file: NotRequired[UploadedFile[bytes]]
    content: NotRequired[str]


class WorkloadIn(serializers.Serializer[WorkloadFields]):
    name = serializers.CharField(max_length=100, required=False, default="")
    verifier = serializers.CharField(max_length=200)
    file = serializers.FileField(required=False)
    content = serializers.CharField(required=False, trim_whitespace=False, help_text="The file's text, for a JSON body.")


class CertifyFields(TypedDict):
    drafts: object  # pair ids or "all", checked by _pairs against the workload's candidates
    hardware: str
    own_machines: bool


class CertifyIn(serializers.Serializer[CertifyFields]):
    drafts = serializers.JSONField(help_text='Pair ids to certify on the workload, or "all" gate-compatible drafts.')
    hardware = serializers.CharField(default="cpu", max_length=32)
    own_machines = serializers.BooleanField(default=False, help_text="Measure on your own self-hosted workers only.")


class WorkloadList(APIView):
    """GET: your workloads. POST: upload one (multipart `file`, or JSON `content`); 201 new, 200 the same upload again."""

    permission_classes = [permissions.IsAuthenticated]
    parser_classes = [MultiPartParser, JSONParser]

    @extend_schema(responses=WorkloadOut(many=True))
    def get(self, request: Request) -> Response:
        return Response(WorkloadOut(workloads_of(user=request.user).filter(deleted_at__isnull=True)[:200], many=True).data)

    @extend_schema(request=WorkloadIn, responses={201: WorkloadOut, 200: WorkloadOut})
    def post(self, request: Request) -> Response:
        given = WorkloadIn(data=request.data)
        given.is_valid(raise_exception=True)
        data: WorkloadFields = given.validated_data
        workload, created = workload_create(
            owner=request.user, name=data["name"], verifier_repo_id=data["verifier"], chunks=_chunks(data)
        )
        return Response(WorkloadOut(workload).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


def _chunks(data: WorkloadFields) -> Iterator[bytes]:
    if data.get("file") is not None:
        return iter(data["file"].chunks(CHUNK))
    if data.get("content"):
        encoded = data["content"].encode()
        return iter(encoded[i : i + CHUNK] for i in range(0, len(encoded), CHUNK))
    raise DRFValidationError({"file": "Upload the workload as multipart `file`, or its text as JSON `content`."})


class WorkloadDetail(APIView):
    """GET: one of your workloads. DELETE: remove its prompts; its runs keep their aggregate figures."""

    @extend_schema(responses=WorkloadOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(WorkloadOut(workload_for(user=request.user, pk=pk)).data)

    @extend_schema(responses=WorkloadOut)
    def delete(self, request: Request, pk: int) -> Response:
        return Response(WorkloadOut(workload_delete(workload=workload_for(user=request.user, pk=pk))).data)


class WorkloadCertify(APIView):
    """Certify drafts for the workload's verifier on it, privately; the runs queue on the hardware class."""

    @extend_schema(request=CertifyIn, responses={201: RunOut(many=True)})
    def post(self, request: Request, pk: int) -> Response:
        workload = workload_for(user=request.user, pk=pk)
        given = CertifyIn(data=request.data)
        given.is_valid(raise_exception=True)
        data: CertifyFields = given.validated_data
        pairs = _pairs(workload, data["drafts"])
        runs = workload_certify(workload=workload, pairs=pairs, hardware=data["hardware"], requested_by=request.user,
                                own_machines=data["own_machines"])  # fmt: skip
        return Response(RunOut(runs, many=True).data, status=status.HTTP_201_CREATED)


def _pairs(workload: Workload, drafts: object) -> list[Pair]:
    candidates = workload_candidates(workload=workload)
    if drafts == "all":
        return list(candidates)
    if not isinstance(drafts, list) or not all(type(d) is int and 1 <= d <= 10**18 for d in drafts) or not 1 <= len(drafts) <= 50:
        raise DRFValidationError({"drafts": 'Give a list of 1 to 50 pair ids, or "all".'})
    found = {pair.pk: pair for pair in candidates.filter(pk__in=drafts)}
    missing = [d for d in drafts if d not in found]
    if missing:
        raise DRFValidationError({"drafts": f"Pairs {missing} are not gate-compatible drafts for {workload.verifier.repo_id}."})
    return [found[d] for d in drafts]


class WorkloadReport(APIView):
    """The candidates measured on the workload, side by side with the public suite, and the recommendation."""

    @extend_schema(responses={200: shape(ReportJson)})
    def get(self, request: Request, pk: int) -> Response:
        workload = workload_for(user=request.user, pk=pk)
        concurrency, hardware = _concurrency(request.query_params.get("concurrency")), request.query_params.get("hardware")
        report = workload_report(workload=workload, concurrency=concurrency, hardware=hardware)
        if hardware and report["hardware"] != hardware:
            raise DRFValidationError({"hardware": f"No finished run on {echo(hardware)} for this workload; measured on "
                                                  f"{report['hardware_measured'] or 'nothing yet'}."})  # fmt: skip
        return Response(report_json(workload, report))


def _concurrency(given: str | None) -> int:
    return whole_number(given, name="concurrency", high=MAX_CONCURRENCY, default=1)


def report_json(workload: Workload, report: Report) -> ReportJson:
    recommendation = report["recommendation"]
    choice = recommendation["choice"] if recommendation else None
    return {
        "workload": WorkloadOut(workload).data,
        "concurrency": report["concurrency"],
        "hardware": report["hardware"],
        "measured_levels": report["measured_levels"],
        "candidates": [_candidate_json(c) for c in report["candidates"]],
        "running": [run.pk for run in report["going"]],
        "recommendation": {"pair": choice["pair"].pk if choice else None, "reason": recommendation["reason"]}
        if recommendation
        else None,
        "export": {"command": bench_command(workload)},
        "notes": notes(workload),
    }


def _candidate_json(candidate: Candidate) -> CandidateJson:
    pair, public = candidate["pair"], candidate["public"]
    suite: SuiteFigures | None = (
        {"run": public["run"].pk, "acceptance": acceptance_out(public["acceptance"]), "speed_c1": public["speed_c1"]}
        if public
        else None
    )
    return {
        "pair": pair.pk,
        "draft": pair.draft.repo_id if pair.draft else pair.method,
        "method": pair.method,
        "run": candidate["run"].pk,
        "acceptance": acceptance_out(candidate["acceptance"]),
        "by_category": candidate["by_category"],
        "speed": candidate["speed"],
        "break_even": {"faster_up_to": candidate["break_even"][0], "slower_from": candidate["break_even"][1]},
        "properties": candidate["properties"],
        "equivalent": candidate["equivalent"],
        "at_concurrency": candidate["at"],
        "public_suite": suite,
        "serve": candidate["serve"],
    }


class WorkloadExport(APIView):
    """The measured sample in vLLM's benchmark-client custom dataset format (JSONL), for re-measuring elsewhere."""

    @extend_schema(responses={(200, "application/jsonl"): str})
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        return export_response(workload_for(user=request.user, pk=pk))


def export_response(workload: Workload) -> StreamingHttpResponse:
    response = StreamingHttpResponse(export_lines(workload=workload), content_type="application/jsonl")
    response["Content-Disposition"] = f'attachment; filename="workload-{workload.pk}.jsonl"'
    return response
