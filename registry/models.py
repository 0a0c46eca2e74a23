"""The catalog's rows. Business rules live in services; these only hold data."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F

from registry.states import FINAL_STATES, RunState
from registry.validation import validate_repo_id, validate_sha


class Role(models.TextChoices):
    VERIFIER = "verifier"
    DRAFT = "draft"
    SPECULATOR = "speculator"


class Method(models.TextChoices):
    DRAFT_MODEL = "draft_model"
    EAGLE = "eagle"
    EAGLE3 = "eagle3"
    MTP = "mtp"
    MEDUSA = "medusa"
    MLP_SPECULATOR = "mlp_speculator"
    NGRAM = "ngram"
    SUFFIX = "suffix"


# Methods that need no draft repository.
DRAFTLESS_METHODS = frozenset({Method.NGRAM, Method.SUFFIX})


class WorkloadCategory(models.TextChoices):
    CODE = "code"
    TRANSLATION = "translation"
    SUMMARIZATION = "summarization"
    CHAT = "chat"
    MATH = "math"
    QA = "qa"
    RAG = "rag"


class HubModel(models.Model):
    """A repo on the Hub pinned to one commit."""

    repo_id = models.CharField(max_length=200, validators=[validate_repo_id])
    sha = models.CharField(max_length=40, validators=[validate_sha])
    role = models.CharField(max_length=16, choices=Role.choices)
    architecture = models.CharField(max_length=100, blank=True)
    family = models.CharField(max_length=100, blank=True)
    parameter_count = models.BigIntegerField(null=True, blank=True)
    dtype = models.CharField(max_length=16, blank=True)
    license = models.CharField(max_length=100, blank=True)
    tokenizer_hash = models.CharField(max_length=64, blank=True)
    config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo_id", "sha"], name="hubmodel_unique_pin")]
        ordering = ["repo_id", "sha"]

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.sha[:12]}"


class Pair(models.Model):
    """A draft@sha with a verifier@sha, served one exact way.

    `identity` is a digest of every field that changes acceptance; it is unique,
    so the same pair can never be stored twice, even by racing processes.
    """

    verifier = models.ForeignKey(HubModel, on_delete=models.PROTECT, related_name="pairs_as_verifier")
    draft = models.ForeignKey(HubModel, on_delete=models.PROTECT, related_name="pairs_as_draft", null=True, blank=True)
    method = models.CharField(max_length=32, choices=Method.choices)
    num_speculative_tokens = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(64)])
    verifier_dtype = models.CharField(max_length=16, default="auto")
    draft_dtype = models.CharField(max_length=16, default="auto")
    options = models.JSONField(default=dict, blank=True)
    format_metadata = models.JSONField(default=dict, blank=True)
    compatibility = models.JSONField(default=dict, blank=True)
    identity = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # The listing: the latest finished run's headline figures, copied when it finishes so the
    # catalog filters and sorts on indexed columns instead of JSON.
    latest_run = models.ForeignKey("CertificationRun", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    verdict = models.CharField(max_length=16, blank=True, db_index=True)
    speedup = models.FloatField(null=True, blank=True, db_index=True)
    mean_acceptance_length = models.FloatField(null=True, blank=True)
    hardware = models.CharField(max_length=32, blank=True)
    engine_version = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The catalog's default sort, read from an index instead of sorting every pair. The
        # NULLS LAST sorts are indexed in migration 0005, on PostgreSQL only (SQLite cannot).
        indexes = [models.Index(F("created_at").desc(), F("id").desc(), name="pair_newest")]

    def __str__(self) -> str:
        draft = self.draft.repo_id if self.draft else self.method
        return f"{draft} → {self.verifier.repo_id} (k={self.num_speculative_tokens})"


class SubmissionStatus(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    REFUSED = "refused"


class Submission(models.Model):
    """Who submitted which draft, when, and what came of it."""

    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
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


class CertificationRun(models.Model):
    """One attempt to certify a pair on one engine build and hardware class.

    `state` changes only through registry.services.runs, which enforces
    registry.states.TRANSITIONS.
    """

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="runs")
    engine = models.CharField(max_length=32)
    engine_version = models.CharField(max_length=64, blank=True)
    hardware = models.CharField(max_length=32)
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices, default=RunTrigger.MANUAL)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    stage = models.CharField(max_length=32, blank=True)
    progress = models.PositiveSmallIntegerField(default=0, validators=[MaxValueValidator(100)])
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    environment = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

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


class Verdict(models.TextChoices):
    CERTIFIED = "certified"
    PROVISIONAL = "provisional"
    FAILED = "failed"
    EXPIRED = "expired"


class Certificate(models.Model):
    """The signed outcome of one run."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="certificates")
    run = models.OneToOneField(CertificationRun, on_delete=models.PROTECT, related_name="certificate")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    thresholds = models.JSONField(default=dict)
    digest = models.CharField(max_length=64)
    signature = models.TextField()
    issued_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    reproduce = models.TextField(blank=True)

    class Meta:
        ordering = ["-issued_at"]

    def __str__(self) -> str:
        return f"{self.verdict} certificate for pair {self.pair_id}"
