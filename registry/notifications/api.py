"""The notifications' API: a user's webhook endpoints (their secret shown once)."""

from __future__ import annotations

from typing import TypedDict

from django.core.validators import URLValidator
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.models import (
    WebhookEndpoint,
    WebhookEvent,
)
from registry.notifications.selectors import webhooks_of
from registry.notifications.services import webhook_endpoint_create, webhook_endpoint_delete


class WebhookFields(TypedDict):
    url: str
    events: list[str]  # empty: every event


class WebhookIn(serializers.Serializer[WebhookFields]):
    url = serializers.URLField(
        max_length=500, validators=[URLValidator(schemes=["http", "https"])], help_text="Where events are POSTed (http or https)."
    )
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=WebhookEvent.choices), required=False, default=list, max_length=16,
        help_text="Events to receive; empty or omitted means every event.",
    )  # fmt: skip


class WebhookOut(serializers.ModelSerializer[WebhookEndpoint]):
    class Meta:
        model = WebhookEndpoint
        fields = ["id", "url", "events", "active", "created_at"]


class WebhookCreatedOut(WebhookOut):
    class Meta(WebhookOut.Meta):
        fields = [*WebhookOut.Meta.fields, "secret"]


class Webhooks(APIView):
    """Your webhook endpoints. Events about pairs you submitted are POSTed there, HMAC-signed with the secret."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses=WebhookOut(many=True))
    def get(self, request: Request) -> Response:
        return Response(WebhookOut(webhooks_of(owner=request.user), many=True).data)

    @extend_schema(request=WebhookIn, responses={201: WebhookCreatedOut})
    def post(self, request: Request) -> Response:
        given = WebhookIn(data=request.data)
        given.is_valid(raise_exception=True)
        fields: WebhookFields = given.validated_data
        endpoint = webhook_endpoint_create(owner=request.user, **fields)
        return Response(WebhookCreatedOut(endpoint).data, status=status.HTTP_201_CREATED)


class WebhookDelete(APIView):
    """Remove one of your webhook endpoints; its pending deliveries go with it."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        endpoint = generics.get_object_or_404(webhooks_of(owner=request.user), pk=pk)
        webhook_endpoint_delete(endpoint=endpoint)
        return Response(status=status.HTTP_204_NO_CONTENT)
