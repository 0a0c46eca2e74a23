"""The runs' rows: submissions, certification runs and their per-category results, regressions, and engine builds
with their qualifications."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models

from registry.catalog.models import Pair
from registry.states import FINAL_STATES, RunState
from registry.traffic.models import Workload
from registry.validation import validate_repo_id


class WorkloadCategory(models.TextChoices):
    CODE = "code"
    TRANSLATION = "translation"
    SUMMARIZATION = "summarization"
    CHAT = "chat"
    MATH = "math"
    QA = "qa"
    RAG = "rag"
    CUSTOM = "custom"


class SubmissionStatus(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REFUSED = "refused"


class SubmissionSource(models.TextChoices):
    USER = "user"
    HUB_IMPORT = "hub-import", "Hub import"


class Submission(models.Model):
    """Who submitted which draft, when, and what came of it; or the Hub import that found it."""

    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    source = models.CharField(max_length=16, choices=SubmissionSource.choices, default=SubmissionSource.USER)
    repo_id = models.CharField(max_length=200, validators=[validate_repo_id])
    revision = models.CharField(max_length=200)
    verifier_repo_id = models.CharField(max_length=200, blank=True)
    verifier_revision = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=SubmissionStatus.choices, default=SubmissionStatus.PENDING)
    validation_report = models.JSONField(default=dict, blank=True)
    pair = models.ForeignKey(Pair, on_delete=models.SET_NULL, null=True, blank=True, related_name="submissions")
    run = models.ForeignKey("CertificationRun", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    refusal_code = models.CharField(max_length=64, blank=True)
    refusal_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.revision} ({self.status})"


class RunTrigger(models.TextChoices):
    SUBMISSION = "submission"
    SCHEDULE = "schedule"
    MANUAL = "manual"
    ENGINE_CHANGE = "engine_change"
    EXPIRY = "expiry"


class Priority(models.IntegerChoices):
    """Celery message priorities on Redis, where 0 is served first."""

    NORMAL = 0
    LOW = 9


class RunQuerySet(models.QuerySet["CertificationRun"]):
    def public(self) -> RunQuerySet:
        """Runs on the public suite: what the catalog, its pages and its API may show anyone."""
        return self.filter(workload__isnull=True)

    def visible_to(self, user: object) -> RunQuerySet:
        """Public runs, plus runs on the user's own workloads (every run, for staff)."""
        if getattr(user, "is_staff", False):
            return self
        if not getattr(user, "is_authenticated", False):
            return self.public()
        return self.filter(models.Q(workload__isnull=True) | models.Q(workload__owner=user))


class CertificationRun(models.Model):
    """One attempt to certify a pair on one engine build and hardware class.

    `state` changes only through registry.services.runs, which enforces
    registry.states.TRANSITIONS.
    """

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="runs")
    # A user's own workload, private to them; null for the public suite, the only runs the catalog shows.
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, null=True, blank=True, related_name="runs")
    engine = models.CharField(max_length=32)
    engine_version = models.CharField(max_length=64, blank=True)
    hardware = models.CharField(max_length=32)
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices, default=RunTrigger.MANUAL)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    # When the broker last took the run's message; null while no dispatch has succeeded.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    stage = models.CharField(max_length=32, blank=True)
    # When the current stage began, and each finished stage's seconds (the stage-duration metrics).
    stage_started_at = models.DateTimeField(null=True, blank=True)
    stage_seconds = models.JSONField(default=dict, blank=True)
    progress = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(100)])
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    # Measured on its requester's own self-hosted workers only (registry/fleet): never sent to the hosted pool.
    own_machines = models.BooleanField(default=False)
    # The self-hosted worker that holds or measured the run (registry/fleet); null for the hosted pool's. Protected: it
    # is the only record of where the run was measured (a worker is revoked, never deleted).
    worker = models.ForeignKey("Worker", on_delete=models.PROTECT, null=True, blank=True, related_name="runs")
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    environment = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state", "heartbeat_at"], name="run_state_heartbeat")]

    def __str__(self) -> str:
        return f"run {self.pk} of pair {self.pair_id} ({self.state})"

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def queue(self) -> str:
        return self.hardware


class WorkloadResult(models.Model):
    """What one finished run measured on one workload category."""

    run = models.ForeignKey(CertificationRun, on_delete=models.CASCADE, related_name="results")
    category = models.CharField(max_length=32, choices=WorkloadCategory.choices)
    mean_acceptance_length = models.FloatField(null=True, blank=True)
    acceptance_rate = models.FloatField(null=True, blank=True)
    greedy_exact_match = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    acceptance = models.JSONField(default=dict, blank=True)
    equivalence = models.JSONField(default=dict, blank=True)
    throughput = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "category"], name="result_unique_per_category")]
        ordering = ["category"]

    def __str__(self) -> str:
        return f"{self.category} of run {self.run_id}"


class Regression(models.Model):
    """A certification that measured a headline figure below the previous one of its lineage."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="regressions")
    run = models.ForeignKey(CertificationRun, on_delete=models.CASCADE, related_name="regressions")
    previous_run = models.ForeignKey(CertificationRun, on_delete=models.CASCADE, related_name="+")
    metric = models.CharField(max_length=32)
    previous = models.FloatField()
    current = models.FloatField()
    relative_change = models.FloatField()
    # The 95 % interval of current over previous, where the figure has one (the speedup); empty for AL,
    # which both runs counted over the same prompts.
    interval = models.JSONField(default=list, blank=True)
    detected_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "metric"], name="regression_unique_per_metric")]
        ordering = ["-detected_at", "-id"]

    def __str__(self) -> str:
        return f"{self.metric} {self.previous:.3g} → {self.current:.3g} on run {self.run_id}"


class EngineBuild(models.Model):
    """An engine version a worker reported for a hardware class it serves."""

    hardware = models.CharField(max_length=32)
    engine = models.CharField(max_length=32)
    version = models.CharField(max_length=64)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)
    reported_by = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["hardware", "engine", "version"], name="engine_build_unique")]
        ordering = ["-last_seen_at", "-id"]

    def __str__(self) -> str:
        return f"{self.engine} {self.version} on {self.hardware}"


class EngineQualification(models.Model):
    """An engine build's controls on one hardware class and dtype (kernel/qualification.py); `document` is the record."""

    engine = models.CharField(max_length=32)
    engine_build = models.CharField(max_length=64)
    hardware = models.CharField(max_length=32)
    dtype = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    passed = models.BooleanField()  # every control the build supports passes
    failing = models.JSONField(default=list)  # the names of the controls that fail
    document = models.JSONField()
    # The self-hosted worker that ran the controls (registry/fleet): its record judges that worker's runs only. Null
    # for the hosted pool's, which judge the hosted runs on the build.
    worker = models.ForeignKey("Worker", on_delete=models.PROTECT, null=True, blank=True, related_name="qualifications")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["engine", "engine_build", "hardware", "dtype"], name="qualification_build")]

    def __str__(self) -> str:
        return f"{self.engine} {self.engine_build} on {self.hardware} ({self.dtype}): {'passes' if self.passed else 'fails'}"
