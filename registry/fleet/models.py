"""Self-hosted workers' rows (issue 41): registration tokens, the workers' own credentials, and their audit log.

A team's own machine reaches the registry only through /api/v1/workers/, with a credential bound to its owner, its
labels and its engine build. Only hashes of the secrets are kept. Rules live in registry/fleet/services.py.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RegistrationToken(models.Model):
    """A one-hour, one-use token a signed-in user makes for a machine to register with; shown once."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="registration_tokens")
    token_hash = models.CharField(max_length=64, unique=True)
    labels = models.JSONField(default=list)  # the hardware classes the worker may claim runs for, e.g. ["h100"]
    ephemeral = models.BooleanField(default=False)  # the worker it registers takes one run, then its credential is gone
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"registration token {self.pk} of {self.owner_id}"


class Worker(models.Model):
    """A self-hosted worker: its owner, labels and engine build, and the hash of its credential."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="fleet")
    name = models.CharField(max_length=100)
    labels = models.JSONField(default=list)
    engine_build = models.CharField(max_length=64)
    token_hash = models.CharField(max_length=64, unique=True)
    token_hint = models.CharField(max_length=12)
    ephemeral = models.BooleanField(default=False)
    # Staff's approval to measure public pairs, like a maintainer's approval before an outside pull request runs.
    public_approved = models.BooleanField(default=False)
    # What the worker reported of its machine at registration: device names and memory, as vLLM and torch saw them.
    hardware_evidence = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"self-hosted worker {self.name} ({self.pk})"

    @property
    def identity(self) -> str:
        """What a run's `claimed_by` says while this worker holds it."""
        return f"self-hosted:{self.pk}:{self.name}"


class WorkerAction(models.TextChoices):
    REGISTERED = "registered"
    QUALIFIED = "qualified"
    CLAIMED = "claimed"
    UPLOADED = "uploaded"
    FAILED = "failed"
    REFUSED = "refused"
    APPROVED = "approved"
    REVOKED = "revoked"
    DEREGISTERED = "deregistered"


class WorkerEvent(models.Model):
    """One line of a worker's audit log, shown on its owner's page."""

    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="events")
    action = models.CharField(max_length=16, choices=WorkerAction.choices)
    run = models.ForeignKey("CertificationRun", on_delete=models.SET_NULL, null=True, blank=True)
    detail = models.TextField(blank=True)
    document_sha256 = models.CharField(max_length=64, blank=True)  # an upload's: the same upload again stores nothing
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.worker_id} {self.action} at {self.at:%Y-%m-%d %H:%M:%S}"
