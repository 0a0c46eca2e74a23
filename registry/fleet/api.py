"""The worker API, /api/v1/workers/ (issue 41): what a self-hosted worker calls, with its own credential only.

`Authorization: Worker shw_...` is read here and nowhere else: the rest of the API does not know the scheme, so a
worker credential used on any other endpoint is an anonymous caller there. A signed-in user makes registration
tokens (POST /api/v1/workers/tokens/), lists their workers and revokes one.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import APIException, AuthenticationFailed, NotFound, PermissionDenied
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.fleet import selectors, services
from registry.fleet.services import FleetRefused
from registry.models import Worker, WorkerAction
from registry.params import WholeNumberField
from registry.states import STAGE_STATES

SCHEME = "Worker"


class WorkerAuthentication(BaseAuthentication):
    """`Authorization: Worker shw_...`: the worker, as request.auth; request.user stays anonymous."""

    def authenticate(self, request: Request) -> tuple[Any, Worker] | None:
        scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
        if scheme != SCHEME:
            return None
        try:
            worker = services.worker_authenticated(secret=secret.strip())
        except services.OwnerDeactivated as gone:
            raise AuthenticationFailed(str(gone), code="owner-deactivated") from None
        if worker is None:
            raise AuthenticationFailed("This worker credential is revoked or unknown: register the machine again with a "
                                       "new registration token.", code="worker-credential")  # fmt: skip
        return AnonymousUser(), worker

    def authenticate_header(self, request: Request) -> str:
        return f'{SCHEME} realm="spechub workers"'


class WorkerScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """The scheme in the OpenAPI document, so that generated clients send it."""

    target_class = "registry.fleet.api.WorkerAuthentication"
    name = "workerCredential"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Worker shw_...`: a worker's credential (POST /api/v1/workers/register/)."}  # fmt: skip


class IsWorker(permissions.BasePermission):
    message = "Send the worker's credential: `Authorization: Worker shw_...` (python -m workers serve does)."

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, Worker)


class WorkerView(APIView):
    authentication_classes = [WorkerAuthentication]
    permission_classes = [IsWorker]

    def worker(self, request: Request) -> Worker:
        assert isinstance(request.auth, Worker)
        return request.auth

    def handle_exception(self, exc: Exception) -> Response:
        """A refusal of the services is a 4xx with its reason: a record that is not one is a 400, one sent again a 409,
        and the rest a 403 (the worker asked for what it does not hold)."""
        if isinstance(exc, services.RecordRefused):
            exc = refused(exc)
        elif isinstance(exc, services.AlreadyQualified):
            exc = Conflict(str(exc))
        elif isinstance(exc, FleetRefused):
            exc = PermissionDenied(str(exc), code="refused")
        return super().handle_exception(exc)


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def refused(exc: FleetRefused) -> DRFValidationError:
    return DRFValidationError({"detail": str(exc)}, code="refused")


class TokenOut(serializers.Serializer[Any]):
    registration_token = serializers.CharField(help_text="shr_...: shown this once; one use, within the hour.")
    labels = serializers.ListField(child=serializers.CharField())
    ephemeral = serializers.BooleanField()
    expires_at = serializers.DateTimeField()


class RegisteredOut(serializers.Serializer[Any]):
    worker = serializers.IntegerField()
    credential = serializers.CharField(help_text="shw_...: the worker's own credential, shown this once.")
    labels = serializers.ListField(child=serializers.CharField())
    ephemeral = serializers.BooleanField()


class ClaimOut(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    attempt = serializers.IntegerField(help_text="Send it with every call about this run: the lease is this attempt's.")
    spec = serializers.DictField(help_text="The run's spec (kernel/spec.py): pair, pinned revisions, plan.")


class QualifyOut(serializers.Serializer[Any]):
    hardware = serializers.ListField(child=serializers.CharField(), help_text="The classes to qualify on before claiming.")
    dtype = serializers.CharField()
    tv = serializers.FloatField(help_text="The total variation each sampling control detects.")
    controls = serializers.ListField(child=serializers.CharField())


class StandingOut(serializers.Serializer[Any]):
    worker = serializers.IntegerField()
    name = serializers.CharField()
    labels = serializers.ListField(child=serializers.CharField())
    engine_build = serializers.CharField()
    public_approved = serializers.BooleanField()
    ephemeral = serializers.BooleanField()
    qualify = QualifyOut()


class QualifiedOut(serializers.Serializer[Any]):
    digest = serializers.CharField()
    hardware = serializers.CharField()
    passed = serializers.BooleanField(help_text="Every control the build supports passes.")
    failing = serializers.ListField(child=serializers.CharField())


class SampleOut(serializers.Serializer[Any]):
    sha256 = serializers.CharField()
    requests = serializers.ListField(child=serializers.DictField(), help_text="The workload's sampled requests.")


class UploadedOut(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    state = serializers.CharField(help_text="publishing until a process holding the signing key finishes it.")


class FailedOut(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    requeued = serializers.BooleanField()


class RevokedOut(serializers.Serializer[Any]):
    worker = serializers.IntegerField()
    released_runs = serializers.ListField(child=serializers.IntegerField())


class TokenIn(serializers.Serializer[Any]):
    labels = serializers.ListField(child=serializers.CharField(max_length=64), max_length=services.MAX_LABELS,
                                   help_text='The hardware classes the worker claims runs for, e.g. ["gpu.h100"].')  # fmt: skip
    ephemeral = serializers.BooleanField(default=False, help_text="One run, then the worker's credential is gone.")


@method_decorator(never_cache, name="dispatch")  # the answer shows a secret: no cache may keep it
class Tokens(APIView):
    """POST (signed in): a registration token, shown this once; it works once, within the hour."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=TokenIn, responses={201: TokenOut})
    def post(self, request: Request) -> Response:
        given = TokenIn(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            token, secret = services.registration_token_create(owner=request.user, **given.validated_data)
        except services.OverLimit as exc:
            raise PermissionDenied(str(exc), code="limit") from None
        except FleetRefused as exc:
            raise refused(exc) from None
        body = {
            "registration_token": secret,
            "labels": token.labels,
            "ephemeral": token.ephemeral,
            "expires_at": token.expires_at,
        }
        return Response(body, status=status.HTTP_201_CREATED)


class RegisterIn(serializers.Serializer[Any]):
    registration_token = serializers.CharField(max_length=100)
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$", help_text="The machine's name, as its owner knows it.")
    engine_build = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$", help_text="e.g. 0.32.0 (vLLM's version).")
    evidence = serializers.DictField(required=False, default=dict, help_text="Devices and memory as vLLM and torch saw them.")


@method_decorator(never_cache, name="dispatch")  # the answer shows the worker's credential: no cache may keep it
class Register(APIView):
    """POST (no credential yet): trade a registration token for the worker's own credential, shown this once."""

    authentication_classes: list[Any] = []
    permission_classes = [permissions.AllowAny]

    def get_authenticate_header(self, request: Request) -> str:  # a refused token is a 401, not a 403
        return 'Bearer realm="spechub worker registration"'

    @extend_schema(request=RegisterIn, responses={201: RegisteredOut})
    def post(self, request: Request) -> Response:
        given = RegisterIn(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            worker, credential = services.worker_register(
                secret=data["registration_token"], name=data["name"], engine_build=data["engine_build"],
                evidence=data["evidence"],
            )  # fmt: skip
        except services.OverLimit as exc:
            raise PermissionDenied(str(exc), code="limit") from None
        except services.OwnerDeactivated as exc:
            raise AuthenticationFailed(str(exc), code="owner-deactivated") from None
        except FleetRefused as exc:
            raise AuthenticationFailed(str(exc), code="registration-token") from None
        body = {"worker": worker.pk, "credential": credential, "labels": worker.labels, "ephemeral": worker.ephemeral}
        return Response(body, status=status.HTTP_201_CREATED)


class Claim(WorkerView):
    """POST: lease the next run on this worker's labels; 204 when there is none."""

    @extend_schema(request=None, responses={200: ClaimOut, 204: None})
    def post(self, request: Request) -> Response:
        spec = services.worker_claim(worker=self.worker(request))
        if spec is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response({"run": spec.run_id, "attempt": spec.attempt, "spec": spec.as_dict()})


class Me(WorkerView):
    """GET: this worker as the registry knows it, and what it must do before it claims: the hardware classes to
    qualify its engine build on, with the controls' settings to run them with."""

    @extend_schema(responses={200: StandingOut})
    def get(self, request: Request) -> Response:
        return Response(selectors.worker_standing(worker=self.worker(request)))


class QualificationIn(serializers.Serializer[Any]):
    document = serializers.DictField(help_text="The qualification record the controls wrote on this worker.")


class Qualification(WorkerView):
    """POST: the qualification of this worker's engine build that it ran on itself; its record judges this worker's
    runs (201)."""

    @extend_schema(request=QualificationIn, responses={201: QualifiedOut})
    def post(self, request: Request) -> Response:
        given = QualificationIn(data=request.data)
        given.is_valid(raise_exception=True)
        row = services.worker_qualify(worker=self.worker(request), document=given.validated_data["document"])
        body = {"digest": row.digest, "hardware": row.hardware, "passed": row.passed, "failing": row.failing}
        return Response(body, status=status.HTTP_201_CREATED)


class AttemptIn(serializers.Serializer[Any]):
    attempt = WholeNumberField(min_value=1)


class Heartbeat(WorkerView):
    @extend_schema(request=AttemptIn, responses={204: None})
    def post(self, request: Request, pk: int) -> Response:
        attempt = _attempt(request)
        services.worker_heartbeat(worker=self.worker(request), run_id=pk, attempt=attempt)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkloadOut(WorkerView):
    """GET ?attempt=N: the held run's workload sample, to keep only while the run measures; 204 for the public suite."""

    @extend_schema(responses={200: SampleOut, 204: None})
    def get(self, request: Request, pk: int) -> Response:
        given = AttemptIn(data=request.query_params)
        given.is_valid(raise_exception=True)
        found = services.worker_workload(worker=self.worker(request), run_id=pk, attempt=given.validated_data["attempt"])
        if found is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response({"sha256": found[0], "requests": found[1]})


class ProgressIn(AttemptIn):
    stage = serializers.ChoiceField(choices=sorted(STAGE_STATES))
    percent = WholeNumberField(min_value=0, max_value=100)


class Progress(WorkerView):
    """POST: the held run's stage and percent; a call is a heartbeat too."""

    @extend_schema(request=ProgressIn, responses={204: None})
    def post(self, request: Request, pk: int) -> Response:
        given = ProgressIn(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        services.worker_progress(worker=self.worker(request), run_id=pk, attempt=data["attempt"], stage=data["stage"],
                                 percent=data["percent"])  # fmt: skip
        return Response(status=status.HTTP_204_NO_CONTENT)


class ResultIn(AttemptIn):
    document = serializers.DictField(help_text="The result document the worker's director wrote.")


class Result(WorkerView):
    """POST: the held run's result document: checked, kept once, then judged and signed by a registry process that
    holds the signing key (202: the run is publishing)."""

    @extend_schema(request=ResultIn, responses={202: UploadedOut})
    def post(self, request: Request, pk: int) -> Response:
        given = ResultIn(data=request.data)
        given.is_valid(raise_exception=True)
        run = services.worker_upload(worker=self.worker(request), run_id=pk, attempt=given.validated_data["attempt"],
                                     document=given.validated_data["document"])  # fmt: skip
        return Response({"run": run.pk, "state": run.state}, status=status.HTTP_202_ACCEPTED)


class FailIn(AttemptIn):
    code = serializers.CharField(max_length=64, help_text="A fault code of kernel/errors.py, e.g. engine:start-failed.")
    detail = serializers.CharField(max_length=2000, required=False, default="", allow_blank=True)


class Fail(WorkerView):
    @extend_schema(request=FailIn, responses={200: FailedOut})
    def post(self, request: Request, pk: int) -> Response:
        given = FailIn(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        retried = services.worker_fail(worker=self.worker(request), run_id=pk, attempt=data["attempt"], code=data["code"],
                                       detail=data["detail"])  # fmt: skip
        return Response({"run": pk, "requeued": retried})


class Deregister(WorkerView):
    """POST: the worker leaves; its credential ends and any run it holds goes back to the queue."""

    @extend_schema(request=None, responses={204: None})
    def post(self, request: Request) -> Response:
        services.worker_revoke(worker=self.worker(request), action=WorkerAction.DEREGISTERED, why="deregistered")
        return Response(status=status.HTTP_204_NO_CONTENT)


class Revoke(APIView):
    """POST (the owner, signed in): revoke one of your workers; its leases end at once."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses={200: RevokedOut})
    def post(self, request: Request, pk: int) -> Response:
        worker = selectors.worker_of(user=request.user, pk=pk)
        if worker is None:
            raise NotFound(f"You have no worker {pk}.")
        released = services.worker_revoke(worker=worker, why=f"revoked by {request.user}")
        return Response({"worker": pk, "released_runs": released})


def _attempt(request: Request) -> int:
    given = AttemptIn(data=request.data)
    given.is_valid(raise_exception=True)
    attempt: int = given.validated_data["attempt"]
    return attempt
