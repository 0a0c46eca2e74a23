"""The catalog's rows. Business rules live in services; these only hold data."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F

from registry.states import FINAL_STATES, RunState
from registry.validation import validate_lossless_options, validate_repo_id, validate_sha


class Role(models.TextChoices):
    VERIFIER = "verifier"
    DRAFT = "draft"
    SPECULATOR = "speculator"


class Method(models.TextChoices):
    """vLLM's methods, as kernel.formats.vllm_support.METHODS lists them (a test keeps the two equal)."""

    DRAFT_MODEL = "draft_model"
    EAGLE = "eagle"
    EAGLE3 = "eagle3"
    DFLASH = "dflash"
    DSPARK = "dspark"
    MTP = "mtp"
    MEDUSA = "medusa"
    MLP_SPECULATOR = "mlp_speculator"
    NGRAM = "ngram"
    SUFFIX = "suffix"


class WorkloadCategory(models.TextChoices):
    CODE = "code"
    TRANSLATION = "translation"
    SUMMARIZATION = "summarization"
    CHAT = "chat"
    MATH = "math"
    QA = "qa"
    RAG = "rag"
    CUSTOM = "custom"


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


def search_text(pair: Pair) -> str:
    """What the catalog's search matches a pair on: its draft's and verifier's repo ids, upper-cased."""
    return f"{pair.draft.repo_id if pair.draft else ''} {pair.verifier.repo_id}".upper()


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
    options = models.JSONField(default=dict, blank=True, validators=[validate_lossless_options])
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
    # Set when a certification measured less than the previous one of the same lineage.
    regressed = models.BooleanField(default=False, db_index=True)
    # The draft's and verifier's repo ids, upper-cased, set on save: the catalog's substring search reads this one
    # column through a trigram index (migration 0015) instead of an OR across two joins.
    search = models.TextField(default="", blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The catalog's default sort, read from an index instead of sorting every pair. The
        # NULLS LAST sorts are indexed in migration 0005, on PostgreSQL only (SQLite cannot).
        indexes = [models.Index(F("created_at").desc(), F("id").desc(), name="pair_newest")]

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        if update_fields is None or "search" in update_fields:  # a listing update leaves the repos, and their rows, alone
            self.search = search_text(self)
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        draft = self.draft.repo_id if self.draft else self.method
        return f"{draft} → {self.verifier.repo_id} (k={self.num_speculative_tokens})"


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
    # The self-hosted worker that holds or measured the run (registry/fleet); null for the hosted pool's.
    worker = models.ForeignKey("Worker", on_delete=models.SET_NULL, null=True, blank=True, related_name="runs")
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

    class Meta:
        ordering = ["-issued_at", "-id"]

    def __str__(self) -> str:
        return f"{self.verdict} certificate for pair {self.pair_id}"


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
    worker = models.ForeignKey("Worker", on_delete=models.CASCADE, null=True, blank=True, related_name="qualifications")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["engine", "engine_build", "hardware", "dtype"], name="qualification_build")]

    def __str__(self) -> str:
        return f"{self.engine} {self.engine_build} on {self.hardware} ({self.dtype}): {'passes' if self.passed else 'fails'}"


class WebhookEvent(models.TextChoices):
    CERTIFIED = "pair.certified"
    REGRESSED = "pair.regressed"
    EXPIRED = "certificate.expired"
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


# One app, its models by domain: the self-hosted workers' are in their own folder.
from registry.fleet.models import RegistrationToken as RegistrationToken  # noqa: E402
from registry.fleet.models import Worker as Worker  # noqa: E402
from registry.fleet.models import WorkerAction as WorkerAction  # noqa: E402
from registry.fleet.models import WorkerEvent as WorkerEvent  # noqa: E402
