"""Users' own traffic: an uploaded workload, its sample and its statistics."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from registry.catalog.models import HubModel


class Workload(models.Model):
    """A user's own traffic: a seeded sample of their requests, private to them and to staff.

    `sample` holds the normalised requests (kernel.traffic.Request.as_dict); deleting the workload
    empties it and keeps the row, so runs on it keep their aggregate figures and their identity.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workloads")
    name = models.CharField(max_length=100)
    verifier = models.ForeignKey(HubModel, on_delete=models.PROTECT, related_name="workloads")
    sha256 = models.CharField(max_length=64, db_index=True)
    format = models.CharField(max_length=16)
    total_requests = models.PositiveIntegerField()
    unique_requests = models.PositiveIntegerField()
    seed = models.PositiveIntegerField(default=0)
    size_bytes = models.PositiveIntegerField(default=0)
    categories = models.JSONField(default=dict, blank=True)
    sample = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "verifier", "sha256"],
                condition=models.Q(deleted_at__isnull=True),
                name="workload_unique_per_owner",
            )
        ]

    def __str__(self) -> str:
        return f"workload {self.pk} ({self.sha256[:12]})"

    @property
    def sampled(self) -> int:
        return len(self.sample)
