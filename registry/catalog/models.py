"""The catalog's rows: Hub models pinned to a commit, and the pairs made of them."""

from __future__ import annotations

from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F

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
        # The engine-version filter has its own: without, the listing's count of a version few pairs
        # have (or none) reads every pair (230 ms at a million). Hardware has none on purpose: a few
        # classes share every pair, and PostgreSQL would AND half a million entries of it into a
        # substring search's few thousand (18 ms, a page's whole budget).
        indexes = [
            models.Index(F("created_at").desc(), F("id").desc(), name="pair_newest"),
            models.Index(fields=["engine_version"], name="pair_engine_version"),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        update_fields = kwargs.get("update_fields")
        if update_fields is None or "search" in update_fields:  # a listing update leaves the repos, and their rows, alone
            self.search = search_text(self)
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        draft = self.draft.repo_id if self.draft else self.method
        return f"{draft} → {self.verifier.repo_id} (k={self.num_speculative_tokens})"
