"""The certificates' rows: a signed certificate per finished run."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from registry.catalog.models import Pair
from registry.runs.models import CertificationRun


class Verdict(models.TextChoices):
    CERTIFIED = "certified"
    PROVISIONAL = "provisional"
    FAILED = "failed"
    EXPIRED = "expired"


class Certificate(models.Model):
    """The signed outcome of one run. `document` is the exact signed file; the other fields index it."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="certificates")
    run = models.OneToOneField(CertificationRun, on_delete=models.PROTECT, related_name="certificate")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    thresholds = models.JSONField(default=dict)
    digest = models.CharField(max_length=64)
    key_id = models.CharField(max_length=16, default="")
    signature = models.TextField()
    document = models.TextField(default="")
    issued_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)
    # When the expiry sweep saw it lapse; the signed verdict itself never changes.
    expired_at = models.DateTimeField(null=True, blank=True)
    reproduce = models.TextField(blank=True)
    # The pull request that published it on the draft's Hub repo, when publishing is on; a sweep
    # dispatches those not yet opened (hub_pr_dispatched_at leases them), unless the Hub refused.
    hub_pr_url = models.URLField(max_length=500, blank=True)
    hub_pr_dispatched_at = models.DateTimeField(null=True, blank=True)
    hub_pr_error = models.TextField(blank=True)
    # Revoked by staff or the owner of a private pair, with a reason; the revocation is logged beside it.
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    revocation_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-issued_at", "-id"]

    def __str__(self) -> str:
        return f"{self.verdict} certificate for pair {self.pair_id}"
