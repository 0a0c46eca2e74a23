"""Input and output serializers; no business rules here."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from registry.formats.vllm_support import MAX_SPECULATIVE_TOKENS, METHOD_CHOICES
from registry.models import CertificationRun, HubModel, Pair, Submission, WorkloadCategory, WorkloadResult
from registry.validation import validate_repo_id, validate_revision


class HubModelOut(serializers.ModelSerializer[HubModel]):
    class Meta:
        model = HubModel
        fields = [
            "id",
            "repo_id",
            "sha",
            "role",
            "architecture",
            "family",
            "parameter_count",
            "dtype",
            "license",
            "tokenizer_hash",
        ]


class WorkloadResultOut(serializers.ModelSerializer[WorkloadResult]):
    class Meta:
        model = WorkloadResult
        fields = [
            "category",
            "mean_acceptance_length",
            "acceptance_rate",
            "greedy_exact_match",
            "speedup",
            "acceptance",
            "equivalence",
        ]


class RunOut(serializers.ModelSerializer[CertificationRun]):
    results = WorkloadResultOut(many=True, read_only=True)
    verdict = serializers.SerializerMethodField()

    class Meta:
        model = CertificationRun
        fields = [
            "id", "pair", "engine", "engine_version", "hardware", "trigger", "state", "stage", "progress", "attempts",
            "max_attempts", "heartbeat_at", "error_code", "error_message", "created_at", "started_at", "finished_at",
            "verdict", "results",
        ]  # fmt: skip

    def get_verdict(self, run: CertificationRun) -> dict[str, Any] | None:
        verdict = ((run.result or {}).get("stages") or {}).get("verdict")
        return {"verdict": verdict["verdict"], "reasons": verdict["reasons"]} if verdict else None


class PairOut(serializers.ModelSerializer[Pair]):
    verifier = HubModelOut(read_only=True)
    draft = HubModelOut(read_only=True, allow_null=True)

    class Meta:
        model = Pair
        fields = [
            "id", "verifier", "draft", "method", "num_speculative_tokens", "options", "created_at",
            "verdict", "speedup", "mean_acceptance_length", "hardware", "engine_version", "latest_run",
        ]  # fmt: skip


class PairDetailOut(PairOut):
    latest_run = serializers.SerializerMethodField()

    class Meta(PairOut.Meta):
        fields = [*PairOut.Meta.fields, "compatibility", "format_metadata", "latest_run"]

    def get_latest_run(self, pair: Pair) -> dict[str, Any] | None:
        run = pair.runs.order_by("-created_at", "-id").first()
        return RunOut(run).data if run else None


class CompatibilityIn(serializers.Serializer[dict[str, Any]]):
    draft = serializers.CharField(required=False, allow_blank=True, validators=[validate_repo_id])
    draft_revision = serializers.CharField(default="main", validators=[validate_revision])
    verifier = serializers.CharField(validators=[validate_repo_id])
    verifier_revision = serializers.CharField(default="main", validators=[validate_revision])
    method = serializers.ChoiceField(choices=METHOD_CHOICES, required=False)
    num_speculative_tokens = serializers.IntegerField(required=False, min_value=1, max_value=MAX_SPECULATIVE_TOKENS)


class RecommendationIn(serializers.Serializer[dict[str, Any]]):
    verifier = serializers.CharField(validators=[validate_repo_id])
    hardware = serializers.CharField(default="cpu", max_length=32)
    concurrency = serializers.IntegerField(default=1, min_value=1, max_value=1024)
    workload = serializers.ChoiceField(choices=WorkloadCategory.choices, required=False, default="")


class SubmissionIn(serializers.Serializer[dict[str, Any]]):
    repo_id = serializers.CharField(validators=[validate_repo_id])
    revision = serializers.CharField(default="main", validators=[validate_revision])
    verifier_repo_id = serializers.CharField(required=False, allow_blank=True, default="", validators=[validate_repo_id])
    verifier_revision = serializers.CharField(default="main", validators=[validate_revision])
    method = serializers.ChoiceField(choices=METHOD_CHOICES, required=False)
    num_speculative_tokens = serializers.IntegerField(required=False, min_value=1, max_value=MAX_SPECULATIVE_TOKENS)


class SubmissionOut(serializers.ModelSerializer[Submission]):
    class Meta:
        model = Submission
        fields = [
            "id", "repo_id", "revision", "verifier_repo_id", "verifier_revision", "status", "refusal_code",
            "refusal_message", "validation_report", "pair", "run", "created_at",
        ]  # fmt: skip
