"""The notifications' rows: webhook endpoints, and the outbox of webhook deliveries and emails."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class WebhookEvent(models.TextChoices):
    CERTIFIED = "pair.certified"
    REGRESSED = "pair.regressed"
    EXPIRED = "certificate.expired"
    REVOKED = "certificate.revoked"
    DRIFT = "deployment.drift"


class WebhookEndpoint(models.Model):
    """Where a user wants events about the pairs they own sent, and the secret that signs them."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=128)
    events = models.JSONField(default=list, blank=True)  # empty: every event
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"webhook {self.pk} → {self.url}"


class DeliveryState(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class Outbound(models.Model):
    """Something SpecHub owes someone outside (a webhook, an email): kept until delivered or out of attempts.

    The row is written in the transaction that raises it, so a broker or mail outage delays it
    and a sweep retries it; nothing is lost with a failed dispatch.
    """

    state = models.CharField(max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class WebhookDelivery(Outbound):
    """One event for one endpoint; retried with backoff until delivered or out of attempts."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=32, choices=WebhookEvent.choices)
    # One delivery per endpoint and subject, however often the event is raised.
    dedupe_key = models.CharField(max_length=100)
    body = models.TextField()
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "dedupe_key"], name="delivery_unique_per_subject")]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="delivery_due")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event} to endpoint {self.endpoint_id} ({self.state})"


class EmailNotice(Outbound):
    """One email to a pair's owner (regressed, expired); sent by a task, retried by the sweep."""

    to = models.EmailField()
    subject = models.CharField(max_length=200)
    body = models.TextField()

    class Meta:
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="email_due")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"email to {self.to} ({self.state})"
