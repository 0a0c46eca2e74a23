"""Deployments held to their certificate: the deployment and its live snapshots."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from registry.catalog.models import Pair
from registry.certificates.models import Certificate
from registry.traffic.models import Workload


class Deployment(models.Model):
    """A user's running deployment of a pair, held to its certificate by the counters its watcher pushes.

    Private to its owner, like a workload. The watcher authenticates with an ingest token that can only push
    observations: only its SHA-256 is kept, the token itself is shown once.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="deployments")
    name = models.CharField(max_length=100)
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="deployments")
    certificate = models.ForeignKey(Certificate, on_delete=models.SET_NULL, null=True, blank=True, related_name="deployments")
    workload = models.ForeignKey(Workload, on_delete=models.SET_NULL, null=True, blank=True, related_name="deployments")
    # The sampling temperature it serves at: its live AL is held to the certified run's figure at that temperature.
    temperature = models.FloatField(default=0.0)
    token_hash = models.CharField(max_length=64, blank=True, db_index=True)  # empty: revoked, or none issued
    token_hint = models.CharField(max_length=12, blank=True)  # the token's first characters, to tell tokens apart
    token_revoked_at = models.DateTimeField(null=True, blank=True)
    # The last judgeable verdict (kernel.live) on the trailing windows, and how often it changed: a
    # deployment.drift delivery per change, never per window.
    state = models.CharField(max_length=16, blank=True)
    state_reason = models.TextField(blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    state_changes = models.PositiveIntegerField(default=0)
    live_al = models.FloatField(null=True, blank=True)  # that verdict's AL, for SpecHub's /metrics
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"deployment {self.pk} ({self.name})"


class LiveSnapshot(models.Model):
    """One push: the counters as the watcher read them (cumulative), and the window since the snapshot before.

    The window's sums (w_*) make the page one aggregate query; thinning old snapshots adds each removed one's
    window into the next kept one, so the windows still sum to the same counts.
    """

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="snapshots")
    read_at = models.DateTimeField()
    read_epoch = models.BigIntegerField()  # read_at in whole seconds: buckets of any width, on SQLite as on PostgreSQL
    received_at = models.DateTimeField(auto_now_add=True)
    drafts = models.BigIntegerField()
    draft_tokens = models.BigIntegerField()
    accepted = models.BigIntegerField()
    per_position = models.JSONField(default=list)
    requests = models.BigIntegerField()
    started_at = models.FloatField(null=True, blank=True)
    engine_version = models.CharField(max_length=64, blank=True)
    w_drafts = models.BigIntegerField(default=0)
    w_accepted = models.BigIntegerField(default=0)
    w_second = models.BigIntegerField(default=0)  # sum over steps of (accepted tokens)^2, from the per-position counts
    w_requests = models.BigIntegerField(default=0)
    w_per_position = models.JSONField(default=list)
    w_reset = models.BooleanField(default=False)  # the server restarted inside the window

    class Meta:
        ordering = ["read_at", "id"]
        constraints = [models.UniqueConstraint(fields=["deployment", "read_at"], name="snapshot_unique_per_time")]
        indexes = [models.Index(fields=["deployment", "read_epoch"], name="snapshot_by_time")]

    def __str__(self) -> str:
        return f"snapshot of deployment {self.deployment_id} at {self.read_at:%Y-%m-%d %H:%M:%S}"
