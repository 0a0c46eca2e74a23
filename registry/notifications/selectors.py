"""Reads about notifications: a user's webhook endpoints."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from registry.models import (
    WebhookEndpoint,
)


def webhooks_of(*, owner: Any) -> QuerySet[WebhookEndpoint]:
    """Return the owner's webhook endpoints, newest first."""
    return WebhookEndpoint.objects.filter(owner=owner).order_by("-created_at", "-id")
