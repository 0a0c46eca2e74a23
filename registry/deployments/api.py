"""The API of deployments: register, read, delete, the ingest token, the watcher's observations, the live windows.

A deployment is its owner's (and staff's): anyone else gets a 404 on every endpoint. The observations endpoint takes
only the deployment's ingest token (`Authorization: Bearer shd_...`), which can push and do nothing else.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, NotRequired, TypedDict

from django.conf import settings
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import permissions, serializers, status
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel import live
from registry.api.shapes import shape
from registry.deployments import selectors, services
from registry.models import Certificate, Deployment, Pair, Workload
from registry.params import WholeNumberField, whole_number


class CertifiedBand(TypedDict):
    band: list[float] | None
    k: int
    engine_version: str | None
    temperature: float


class DeploymentOut(serializers.ModelSerializer[Deployment]):
    certified = serializers.SerializerMethodField()
    token_revoked = serializers.SerializerMethodField()

    class Meta:
        model = Deployment
        fields = ["id", "name", "pair", "certificate", "workload", "temperature", "state", "state_reason", "state_changed_at",
                  "live_al", "token_hint", "token_revoked", "certified", "created_at"]  # fmt: skip

    @extend_schema_field(shape(CertifiedBand | None))
    def get_certified(self, deployment: Deployment) -> CertifiedBand | None:
        """The band live AL is held to (the certified AL's 95 % interval at the temperature the deployment serves; null
        where the certified run gave none, and the state is "no band"), the k and the engine build certified."""
        found = selectors.certified_for(deployment=deployment)
        if found is None:
            return None
        return {"band": list(found.band) if found.band else None, "k": found.k, "engine_version": found.engine_version,
                "temperature": deployment.temperature}  # fmt: skip

    def get_token_revoked(self, deployment: Deployment) -> bool:
        return not deployment.token_hash


class DeploymentFields(TypedDict):
    name: str
    pair: int
    certificate: NotRequired[int | None]
    workload: NotRequired[int | None]
    temperature: float


class DeploymentIn(serializers.Serializer[DeploymentFields]):
    name = serializers.CharField(max_length=100)
    pair = WholeNumberField(min_value=1, help_text="The pair the deployment serves.")
    certificate = WholeNumberField(
        required=False, allow_null=True, min_value=1, help_text="Its certificate, if not the latest run."
    )
    workload = WholeNumberField(required=False, allow_null=True, min_value=1, help_text="Your workload it was certified on.")
    temperature = serializers.FloatField(required=False, default=0.0, min_value=0.0, max_value=2.0,
                                         help_text="The sampling temperature it serves at: 0 (greedy), or one the certified "
                                                   "run measured acceptance at (0.7 and 1.0 by default).")  # fmt: skip


class SnapshotFields(TypedDict):
    read_at: float
    drafts: int
    draft_tokens: int
    accepted: int
    per_position: list[int]
    requests: int
    started_at: NotRequired[float | None]
    engine_version: NotRequired[str | None]
    k: NotRequired[int | None]


class SnapshotIn(serializers.Serializer[SnapshotFields]):
    read_at = serializers.FloatField(help_text="When the counters were read, seconds since the epoch.")
    drafts = WholeNumberField(min_value=0, help_text="vllm:spec_decode_num_drafts, cumulative.")
    draft_tokens = WholeNumberField(min_value=0)
    accepted = WholeNumberField(min_value=0)
    per_position = serializers.ListField(child=WholeNumberField(min_value=0), max_length=live.MAX_POSITIONS)
    requests = WholeNumberField(min_value=0, help_text="vllm:request_success, summed over its labels.")
    started_at = serializers.FloatField(required=False, allow_null=True, help_text="process_start_time_seconds.")
    engine_version = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=64)
    k = WholeNumberField(required=False, allow_null=True, min_value=1, max_value=live.MAX_POSITIONS)


class Pushed(TypedDict):
    snapshots: list[SnapshotFields]


class ObservationsIn(serializers.Serializer[Pushed]):
    snapshots = SnapshotIn(many=True, allow_empty=False)


class IngestedOut(serializers.Serializer[services.Ingested]):
    stored = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="snapshots already stored: a retried push")
    state = serializers.CharField()
    reason = serializers.CharField()
    live_al = serializers.FloatField(allow_null=True)


class Timeline(TypedDict):
    deployment: Annotated[dict[str, object], DeploymentOut]
    days: int
    windows: list[selectors.Point]
    positions: list[selectors.PositionRow]


@method_decorator(never_cache, name="dispatch")  # a registration's answer shows its ingest token: no cache may keep it
class DeploymentList(APIView):
    """GET: your deployments. POST: register one; the answer carries its ingest token, shown this once."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses=DeploymentOut(many=True))
    def get(self, request: Request) -> Response:
        return Response(DeploymentOut(selectors.deployments_of(user=request.user)[:200], many=True).data)

    @extend_schema(request=DeploymentIn, responses={201: DeploymentOut})
    def post(self, request: Request) -> Response:
        given = DeploymentIn(data=request.data)
        given.is_valid(raise_exception=True)
        data: DeploymentFields = given.validated_data
        deployment, token = services.deployment_create(
            owner=request.user, name=data["name"], pair=_pair(data["pair"]),
            certificate=_certificate(data.get("certificate")), workload=_workload(request, data.get("workload")),
            temperature=data["temperature"],
        )  # fmt: skip
        return Response({**DeploymentOut(deployment).data, "ingest_token": token}, status=status.HTTP_201_CREATED)


def _pair(pk: int) -> Pair:
    found = Pair.objects.select_related("verifier").filter(pk=pk).first()
    if found is None:
        raise DRFValidationError({"pair": f"No pair {pk} in the catalog."})
    return found


def _certificate(pk: int | None) -> Certificate | None:
    if pk is None:
        return None
    found = Certificate.objects.select_related("run").filter(pk=pk, run__workload__isnull=True).first()
    if found is None:
        raise DRFValidationError({"certificate": f"No public certificate {pk}."})
    return found


def _workload(request: Request, pk: int | None) -> Workload | None:
    if pk is None:
        return None
    found = Workload.objects.filter(pk=pk, owner_id=request.user.pk, deleted_at__isnull=True).first()
    if found is None:
        raise DRFValidationError({"workload": f"No workload {pk} of yours."})
    return found


class DeploymentDetail(APIView):
    """GET: one of your deployments. DELETE: remove it and its observations."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses=DeploymentOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(DeploymentOut(selectors.deployment_for(user=request.user, pk=pk)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        services.deployment_delete(deployment=selectors.deployment_for(user=request.user, pk=pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class IngestReset(APIView):
    """POST: remove the snapshots read after the server's clock (a watcher's clock that ran ahead) that hold every later
    push out of order; its history stays."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses={200: dict[str, int]})
    def post(self, request: Request, pk: int) -> Response:
        deployment = selectors.deployment_for(user=request.user, pk=pk)
        return Response({"removed": services.deployment_ingest_reset(deployment=deployment)})


@method_decorator(never_cache, name="dispatch")  # the answer shows the new ingest token: no cache may keep it
class DeploymentToken(APIView):
    """POST: a new ingest token (the old one stops working), shown this once. DELETE: revoke the token."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses={201: dict[str, str]})
    def post(self, request: Request, pk: int) -> Response:
        token = services.deployment_token_issue(deployment=selectors.deployment_for(user=request.user, pk=pk))
        return Response({"ingest_token": token}, status=status.HTTP_201_CREATED)

    @extend_schema(responses=DeploymentOut)
    def delete(self, request: Request, pk: int) -> Response:
        deployment = services.deployment_token_revoke(deployment=selectors.deployment_for(user=request.user, pk=pk))
        return Response(DeploymentOut(deployment).data)


class Observations(APIView):
    """POST (the watcher, with the ingest token): counter snapshots as read. GET (the owner): the live windows."""

    def get_permissions(self) -> list[Any]:
        return [permissions.AllowAny()] if self.request.method == "POST" else [permissions.IsAuthenticated()]

    def get_authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="spechub ingest"'

    @extend_schema(request=ObservationsIn, responses={201: IngestedOut, 200: IngestedOut})
    def post(self, request: Request, pk: int) -> Response:
        deployment = _by_token(request, pk)
        given = ObservationsIn(data=request.data)
        given.is_valid(raise_exception=True)
        pushed: Pushed = given.validated_data
        snapshots = [_snapshot(s) for s in pushed["snapshots"]]
        _within_push_limit(len(snapshots))
        try:
            ingested = services.observations_ingest(deployment=deployment, snapshots=snapshots)
        except services.IngestThrottled as throttled:
            raise Throttled(wait=60, detail=str(throttled)) from None
        except services.IngestRefused as refused:
            error = {"code": refused.code, "message": refused.message, "details": refused.details}
            return Response({"error": error}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
        retried = ingested.stored == 0  # every snapshot is stored already: an exact retry changes nothing
        return Response(IngestedOut(ingested).data, status=status.HTTP_200_OK if retried else status.HTTP_201_CREATED)

    @extend_schema(responses={200: shape(Timeline)})
    def get(self, request: Request, pk: int) -> Response:
        deployment = selectors.deployment_for(user=request.user, pk=pk)
        days = _days(request.query_params.get("days"))
        certified = selectors.certified_for(deployment=deployment)
        points = selectors.timeline(deployment=deployment, certified=certified, since=timezone.now() - timedelta(days=days))
        positions = selectors.positions_now(deployment=deployment, certified=certified)
        answer: Timeline = {"deployment": DeploymentOut(deployment).data, "days": days, "windows": points, "positions": positions}
        return Response(answer)


def _by_token(request: Request, pk: int) -> Deployment:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.startswith(services.TOKEN_PREFIX):
        raise AuthenticationFailed("Send the deployment's ingest token: `Authorization: Bearer shd_...`.", code="ingest-token")
    found = selectors.deployment_by_token(pk=pk, token_hash=services.token_digest(token.strip()))
    if found is None:
        raise AuthenticationFailed("This ingest token is not valid for this deployment: it was revoked or replaced. "
                                   "Issue a new one on the deployment's page.", code="ingest-token")  # fmt: skip
    if not found.owner.is_active:
        raise AuthenticationFailed("The account that owns this deployment is deactivated: its ingest token stopped "
                                   "with it. Ask the registry's staff to reactivate the account.",
                                   code="owner-deactivated")  # fmt: skip
    return found


def _snapshot(data: SnapshotFields) -> live.Snapshot:
    return live.Snapshot(data["read_at"], data["drafts"], data["draft_tokens"], data["accepted"], tuple(data["per_position"]),
                         data["requests"], data.get("started_at"), data.get("engine_version") or None, data.get("k"))  # fmt: skip


def _within_push_limit(count: int) -> None:
    """At most SPECHUB_LIVE_SNAPSHOTS_PER_PUSH in one push (the per-minute limit is counted under the ingest's lock)."""
    if count > settings.SPECHUB_LIVE_SNAPSHOTS_PER_PUSH:
        raise DRFValidationError({"snapshots": f"{count} snapshots in one push; send at most "
                                               f"{settings.SPECHUB_LIVE_SNAPSHOTS_PER_PUSH}."})  # fmt: skip


def _days(given: str | None) -> int:
    return whole_number(given, name="days", high=366, default=7)
