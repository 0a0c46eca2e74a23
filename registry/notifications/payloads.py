"""The webhook events' payloads, for the OpenAPI schema's `webhooks` section (SPECTACULAR_SETTINGS["WEBHOOKS"]).

Deliveries are POSTs of these bodies, signed the Standard Webhooks way (registry/notifications/signing.py).
"""

from __future__ import annotations

from typing import TypedDict, TypeVar

from drf_spectacular.utils import OpenApiResponse, OpenApiWebhook, extend_schema
from rest_framework import serializers

SIGNED = (
    "Signed the Standard Webhooks way: verify the `webhook-id`, `webhook-timestamp` and `webhook-signature` "
    "headers with your endpoint's `whsec_` secret and any Standard Webhooks library, for example "
    "`standardwebhooks.webhooks.Webhook(secret).verify(body, headers)`. `webhook-id` is the same on every "
    "retry of a delivery. Answer 2xx; anything else is retried with backoff."
)


# Each body's keys are written twice, as the TypedDict its producer fills and as the serializer the schema publishes;
# tests/registry/api/test_shapes.py holds the two to the same keys.


class Certified(TypedDict):
    run: int
    certificate_digest: str
    mean_acceptance_length: float | None
    speedup: float | None  # at concurrency 1


class ChangeFigures(TypedDict):
    previous: float
    current: float
    change: float
    interval: list[float]
    detectable_drop: float | None


class Regressed(TypedDict):
    run: int
    previous_run: int
    regressions: dict[str, ChangeFigures]  # by metric


class Expired(TypedDict):
    certificate_digest: str
    expires_at: str  # ISO 8601


class Revoked(TypedDict):
    certificate: int
    certificate_digest: str
    reason: str
    revoked_at: str  # ISO 8601
    log_index: int  # the revocation's entry in the transparency log


# "from" is a keyword, so this one is written the functional way.
Drift = TypedDict("Drift", {"from": str | None, "to": str, "reason": str, "live_al": float | None,
                            "certified_band": list[float] | None})  # fmt: skip


class PairEvent(TypedDict):
    event: str
    subject: str
    pair: int
    url: str
    data: Certified | Regressed | Expired | Revoked


class DeploymentEvent(TypedDict):
    event: str
    subject: str
    deployment: int
    pair: int
    url: str
    data: Drift


_Shape = TypeVar("_Shape")


class CertifiedData(serializers.Serializer[Certified]):
    run = serializers.IntegerField()
    certificate_digest = serializers.CharField(help_text="sha256 of the signed certificate's payload")
    mean_acceptance_length = serializers.FloatField(allow_null=True)
    speedup = serializers.FloatField(allow_null=True, help_text="at concurrency 1")


class Change(serializers.Serializer[ChangeFigures]):
    previous = serializers.FloatField()
    current = serializers.FloatField()
    change = serializers.FloatField(help_text="relative: current over previous, less 1 (a timed figure's: of its paired blocks)")
    interval = serializers.ListField(
        child=serializers.FloatField(), help_text="95 % interval of current over previous; empty for AL (same prompts)"
    )
    detectable_drop = serializers.FloatField(
        allow_null=True,
        help_text="a drop (a fraction) a fresh comparison on this hardware flags at least half the time wherever the timings "
        "scatter by up to 15 % (CV) and the pair moves no more than its run-to-run floor; null for AL (counted)",
    )


class RegressedData(serializers.Serializer[Regressed]):
    run = serializers.IntegerField()
    previous_run = serializers.IntegerField()
    regressions = serializers.DictField(child=Change(), help_text="by metric: mean_acceptance_length, speedup")


class ExpiredData(serializers.Serializer[Expired]):
    certificate_digest = serializers.CharField()
    expires_at = serializers.DateTimeField()


class RevokedData(serializers.Serializer[Revoked]):
    certificate = serializers.IntegerField()
    certificate_digest = serializers.CharField()
    reason = serializers.CharField()
    revoked_at = serializers.DateTimeField()
    log_index = serializers.IntegerField(help_text="the revocation's index in the transparency log")


def _event(name: str, data: type[serializers.Serializer[_Shape]], about: str) -> type[serializers.Serializer[PairEvent]]:
    fields = {
        "event": serializers.ChoiceField(choices=[name]),
        "subject": serializers.CharField(help_text=f"{about}; one delivery per event and subject"),
        "pair": serializers.IntegerField(),
        "url": serializers.URLField(help_text="the pair's page"),
        "data": data(),
    }
    return type(f"{data.__name__.removesuffix('Data')}Event", (serializers.Serializer,), fields)


def _webhook(name: str, summary: str, body: type[serializers.Serializer[_Shape]]) -> OpenApiWebhook:
    return OpenApiWebhook(
        name=name,
        decorator=extend_schema(summary=summary, description=SIGNED, request=body,
                                responses={200: OpenApiResponse(description="received")}),
    )  # fmt: skip


CERTIFIED = _webhook("pair.certified", "A run of one of your pairs finished certified",
                     _event("pair.certified", CertifiedData, "run-<id>"))  # fmt: skip
REGRESSED = _webhook("pair.regressed", "A new revision of your draft measured worse than the one before",
                     _event("pair.regressed", RegressedData, "run-<id>"))  # fmt: skip
EXPIRED = _webhook("certificate.expired", "A certificate of one of your pairs expired",
                   _event("certificate.expired", ExpiredData, "certificate-<id>"))  # fmt: skip
REVOKED = _webhook("certificate.revoked", "A certificate of one of your pairs was revoked, with the reason",
                   _event("certificate.revoked", RevokedData, "certificate-<id>-revoked"))  # fmt: skip


class DriftData(serializers.Serializer[Drift]):
    # "from" is a keyword: the field is declared below.
    to = serializers.CharField(help_text="within, below, collapse or mismatch (kernel/live.py)")
    reason = serializers.CharField()
    live_al = serializers.FloatField(allow_null=True, help_text="over the newest judgeable windows")
    certified_band = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="the certified AL's 95 % interval; null where it gave none"
    )


DriftData._declared_fields["from"] = serializers.CharField(allow_null=True, help_text="the verdict before; null at first")
DriftEvent = type("DriftEvent", (serializers.Serializer,), {
    "event": serializers.ChoiceField(choices=["deployment.drift"]),
    "subject": serializers.CharField(help_text="deployment-<id>-change-<n>; one delivery per change of verdict"),
    "deployment": serializers.IntegerField(),
    "pair": serializers.IntegerField(),
    "url": serializers.URLField(help_text="the deployment's page"),
    "data": DriftData(),
})  # fmt: skip
DRIFT = _webhook("deployment.drift", "One of your deployments' live acceptance changed verdict against its certificate",
                 DriftEvent)  # fmt: skip
