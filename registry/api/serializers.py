"""The shapes several domains' endpoints return: a run with its figures (the runs', a pair's, a workload's), a
certificate and a regression. A shape one domain alone returns is in that domain's api.py. No business rules here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from kernel import result
from kernel.certificates import MeasuredOn
from registry.fleet.selectors import measured_on
from registry.models import (
    Certificate,
    CertificationRun,
    Regression,
    WorkloadResult,
)
from registry.runs.quantized import QuantizedComparison, quantized_comparison
from registry.runs.selectors import RunFigures, regression_detectable, run_figures


class WorkloadResultOut(serializers.ModelSerializer[WorkloadResult]):
    indicative_speedup = serializers.FloatField(
        source="speedup", read_only=True, allow_null=True,
        help_text="Speedup at c=1 on this category's prompts alone: indicative, each timed block holds one or two of them, "
        "so it carries no interval and no label.",
    )  # fmt: skip
    acceptance = serializers.SerializerMethodField()

    class Meta:
        model = WorkloadResult
        fields = [
            "category",
            "mean_acceptance_length",
            "acceptance_rate",
            "greedy_exact_match",
            "indicative_speedup",
            "acceptance",
            "equivalence",
        ]

    def get_acceptance(self, row: WorkloadResult) -> dict[str, object] | None:
        """AL with its 95 % interval over prompts where there were 8 or more, and the share of drafts accepted through
        each position, cumulative (positions 1 to i all accepted), as `cumulative_per_position`."""
        return acceptance_out(row.acceptance)


def acceptance_out(figures: Mapping[str, Any] | None) -> dict[str, object] | None:
    """A document's acceptance figures as the API names them: `per_position` is cumulative, and says so."""
    if figures is None:
        return None
    named = dict(figures)
    for field in ("per_position", "per_position_interval"):
        if field in named:
            named[f"cumulative_{field}"] = named.pop(field)
    for rows in ("by_length", "by_temperature"):
        if rows in named:
            named[rows] = [acceptance_out(row) for row in named[rows]]
    if "by_mode" in named:  # the thinking switch on and off (issue 53): each mode's row named as the others are
        named["by_mode"] = {**named["by_mode"], "modes": [acceptance_out(row) for row in named["by_mode"]["modes"]]}
    return named


class SpeedOut(serializers.Serializer[result.SpeedAtLevel]):
    concurrency = serializers.IntegerField()
    speedup = serializers.FloatField()
    interval = serializers.ListField(
        child=serializers.FloatField(), help_text="95 % interval of the speedup (Student t over the paired block ratios)."
    )
    supports = serializers.CharField(
        help_text="What the interval supports: faster or slower (by the margin), either but not by the margin, or no "
        "measurable difference; or why a level does not claim it."
    )
    baseline_tokens_per_second = serializers.FloatField(allow_null=True)
    speculative_tokens_per_second = serializers.FloatField(allow_null=True)
    pairs = serializers.IntegerField(help_text="Paired baseline/speculative blocks the interval rests on (0: measured offline).")
    stopping = serializers.CharField(
        allow_null=True, help_text="Why the level stopped at that many pairs; null for an older run's fixed count."
    )
    dof = serializers.IntegerField(help_text="The interval's t degrees of freedom.")
    limited_by = serializers.CharField(
        help_text="Why the measuring machine, not the pair, set this level's pace, from its timed blocks; empty if it did not."
    )


class PercentilesOut(serializers.Serializer[dict[str, float | None]]):
    # A side an older run did not measure is {}: no percentile is required.
    p50 = serializers.FloatField(allow_null=True, required=False)
    p90 = serializers.FloatField(allow_null=True, required=False)
    p95 = serializers.FloatField(allow_null=True, required=False)
    p99 = serializers.FloatField(allow_null=True, required=False)


class LatencyOut(serializers.Serializer[result.LatencyRow]):
    where = serializers.CharField(help_text="The concurrency level (c=4) or the Poisson arrival rate.")
    metric = serializers.ChoiceField(choices=list(result.LATENCIES), help_text="ttft, tpot, itl or e2e.")
    baseline = PercentilesOut(help_text="Milliseconds, the verifier alone: the engine's own figure where `delayed` names it.")
    speculative = PercentilesOut(help_text="Milliseconds, with the draft: the engine's own figure where `delayed` names it.")
    delayed = serializers.ListField(
        child=serializers.ChoiceField(choices=["baseline", "speculative"]), required=False,
        help_text="The sides whose client figures the measuring machine's front end delayed (they differed from vLLM's "
                  "own histograms beyond the tolerance): their figures here are the engine's. Absent on older runs.",
    )  # fmt: skip
    client = serializers.DictField(child=PercentilesOut(), required=False,
                                   help_text="What the client saw, for the delayed sides.")  # fmt: skip


class MeasurementOut(serializers.Serializer[result.Measurement]):
    mode = serializers.CharField(allow_null=True, help_text="serving: two servers timed in paired blocks; offline: older runs.")
    recipe = serializers.CharField(allow_null=True, help_text="The `vllm serve` command that was measured.")
    baseline_recipe = serializers.CharField(allow_null=True, help_text="The verifier-alone command it was measured against.")
    output_tokens = serializers.IntegerField(allow_null=True)
    request_rate = serializers.FloatField(allow_null=True, help_text="The Poisson point's arrival rate, requests/s.")
    latency_speedup = serializers.FloatField(allow_null=True, help_text="Baseline over speculative mean E2E latency there.")
    latency_speedup_interval = serializers.ListField(child=serializers.FloatField())
    counters_agree = serializers.BooleanField(
        allow_null=True, help_text="Whether the server's /metrics spec-decode counters equal the offline engine's."
    )
    load = serializers.DictField(allow_null=True, help_text="The machine's load around the timed blocks.")


class KSpeedOut(serializers.Serializer[result.KSpeed]):
    k = serializers.IntegerField()
    mean_acceptance_length = serializers.FloatField(help_text="AL read at k from the run's per-position counters.")
    predicted_speedup = serializers.FloatField(help_text="Predicted from the step costs measured on the pair: not measured.")


class BestKOut(serializers.Serializer[result.BestKRow]):
    concurrency = serializers.IntegerField()
    best_k = serializers.IntegerField(help_text="The k with the highest predicted speedup at this level.")
    predicted = KSpeedOut(many=True)
    predicted_speedup = serializers.FloatField(help_text="The best k's, predicted.")
    measured_speedup = serializers.FloatField(allow_null=True, help_text="The best k's, measured in paired blocks.")
    interval = serializers.ListField(child=serializers.FloatField(), help_text="Its 95 % interval.")
    supports = serializers.CharField(help_text="What the measured interval supports.")
    pairs = serializers.IntegerField()
    recipe = serializers.CharField(allow_null=True, help_text="The `vllm serve` line at the best k, as measured.")
    fitted_from_k = serializers.ListField(
        child=serializers.IntegerField(), help_text="The two measured k's the draft's cost was fitted from; empty: from one."
    )


class SmokeFeatureOut(serializers.Serializer[result.SmokeFeature]):
    feature = serializers.CharField()
    outcome = serializers.CharField(help_text="equal, differs, runs (sampled, not compared), fails, not-supported, "
                                    "speculation off (no drafting during it), parameter ignored, constraint broken "
                                    "(structured output) or not judged")  # fmt: skip
    detail = serializers.CharField()
    divergence = serializers.DictField(required=False, help_text="the first diverging request and token")
    error = serializers.CharField(required=False, help_text="the engine's own message")
    refused_at_start = serializers.BooleanField(
        required=False, help_text="the verifier alone exited at its start with it: the build's, kept for later runs"
    )


class SmokeOut(serializers.Serializer[result.Smoke]):
    features = SmokeFeatureOut(many=True)
    seconds = serializers.FloatField()


class PropertyOut(serializers.Serializer[result.PropertyVerdict]):
    outcome = serializers.CharField(help_text="acceptance: measured; greedy: pass/fail; sampling: pass/inconclusive/fail/"
                                    "not-judgeable/not-run; speed: faster/faster, but not by the margin/"
                                    "no measurable difference/slower")  # fmt: skip
    fault = serializers.CharField(allow_null=True, help_text="pair, engine, or null when it cannot be told")
    reason = serializers.CharField()
    evidence = serializers.DictField()


class PropertiesOut(serializers.Serializer[result.Properties]):
    acceptance = PropertyOut()
    greedy = PropertyOut()
    sampling = PropertyOut()
    speed = PropertyOut()


class QualificationCitedOut(serializers.Serializer[dict[str, str]]):
    digest = serializers.CharField()
    engine = serializers.CharField()
    engine_build = serializers.CharField()
    hardware = serializers.CharField()
    dtype = serializers.CharField()


class CitedVerdict(TypedDict):
    """What the API cites of a document's verdict; the thresholds, figures and environment are its own fields."""

    verdict: str | None
    reasons: list[str] | None
    properties: result.Properties | None  # null for documents judged before per-property verdicts
    qualification: dict[str, str] | None


class VerdictOut(serializers.Serializer[CitedVerdict]):
    # Null only where a stored verdict stage lacks them: the answer names what the document holds, as it holds it.
    verdict = serializers.CharField(allow_null=True)
    reasons = serializers.ListField(child=serializers.CharField(), allow_null=True)
    properties = PropertiesOut(allow_null=True)
    qualification = QualificationCitedOut(allow_null=True)


class MeasuredOnOut(serializers.Serializer[MeasuredOn]):
    kind = serializers.ChoiceField(choices=["hosted", "self-hosted"])
    worker = serializers.CharField(allow_null=True)
    owner = serializers.CharField(allow_null=True)
    engine_build = serializers.CharField(allow_null=True)
    evidence = serializers.DictField(allow_null=True)


class RunOut(serializers.ModelSerializer[CertificationRun]):
    results = WorkloadResultOut(many=True, read_only=True)
    verdict = serializers.SerializerMethodField()
    speed = serializers.SerializerMethodField()
    latency = serializers.SerializerMethodField()
    measurement = serializers.SerializerMethodField()
    smoke = serializers.SerializerMethodField()
    acceptance = serializers.SerializerMethodField()
    best_k = serializers.SerializerMethodField()
    schedule = serializers.SerializerMethodField()
    measured_on = serializers.SerializerMethodField()
    quantized = serializers.SerializerMethodField()

    class Meta:
        model = CertificationRun
        fields = [
            "id", "pair", "workload", "engine", "engine_version", "hardware", "measured_on", "trigger", "priority",
            "dispatched_at", "state", "stage", "progress", "attempts",
            "max_attempts", "heartbeat_at", "error_code", "error_message", "created_at", "started_at", "finished_at",
            "verdict", "acceptance", "speed", "best_k", "schedule", "latency", "measurement", "smoke", "results",
            "quantized",
        ]  # fmt: skip

    @extend_schema_field(MeasuredOnOut)
    def get_measured_on(self, run: CertificationRun) -> MeasuredOn:
        """Where the run was measured: SpecHub's hosted pool, or a team's own machine (its name, owner and what it
        reported of its hardware and engine build)."""
        return measured_on(run)

    def to_representation(self, instance: CertificationRun) -> dict[str, object]:
        # The four document fields below share one read of the run's document (selectors.run_figures).
        self._run_figures: RunFigures = run_figures(instance)
        return super().to_representation(instance)

    @extend_schema_field(SpeedOut(many=True))
    def get_speed(self, run: CertificationRun) -> list[result.SpeedAtLevel]:
        """Each concurrency level's speedup with its interval, and what the interval supports."""
        return self._run_figures["speed"]

    @extend_schema_field(BestKOut(many=True))
    def get_best_k(self, run: CertificationRun) -> list[result.BestKRow]:
        """Each level's best k: every k's predicted speedup, and the best one's measured speedup with its interval."""
        return self._run_figures["best_k"]

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_schedule(self, run: CertificationRun) -> result.ServedSchedule | None:
        """The batch-size schedule (vLLM's num_speculative_tokens_per_batch_size) composed from each level's best k,
        served and timed at every level: its ranges, speedups, whether the engine honoured it, and whether it is the
        command to serve (serve_it, why). Null where one k was best everywhere."""
        return self._run_figures["schedule"]

    @extend_schema_field(LatencyOut(many=True))
    def get_latency(self, run: CertificationRun) -> list[result.LatencyRow]:
        """TTFT, TPOT, ITL and E2E percentiles per level and at the Poisson point, baseline beside speculative."""
        return self._run_figures["latency"]

    @extend_schema_field(SmokeOut(allow_null=True))
    def get_smoke(self, run: CertificationRun) -> result.Smoke | None:
        """The serving-feature grid: each feature with speculation against the verifier alone with it."""
        return self._run_figures["smoke"]

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_acceptance(self, run: CertificationRun) -> dict[str, object] | None:
        """The whole suite's acceptance: AL with its interval over prompts, the cumulative per-position rates, AL read
        at each smaller k (by_k), by prompt length (by_length), and by temperature on the same prompts (by_temperature:
        greedy, then sampled at top_p 1, each per-position rate with Wilson's interval over drafting steps); the mode
        these figures hold for (mode: the prompts as written, or the chat template and its switches), and where the
        verifier's chat template takes a thinking switch, AL with it on and off on the same prompts, each with its
        interval, and their difference paired per prompt (by_mode)."""
        return acceptance_out(self._run_figures["acceptance"])

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_quantized(self, run: CertificationRun) -> QuantizedComparison | None:
        """Where the pair has a quantized checkpoint: the scheme and base each names, the AL change against the
        unquantized pair's newest run on the same suite, build, hardware and k, paired per prompt with its interval
        (or why it was not compared), and what greedy equivalence was judged against. Null for an unquantized pair."""
        return quantized_comparison(run=run)

    @extend_schema_field(MeasurementOut(allow_null=True))
    def get_measurement(self, run: CertificationRun) -> result.Measurement | None:
        return self._run_figures["measurement"]

    @extend_schema_field(VerdictOut(allow_null=True))
    def get_verdict(self, run: CertificationRun) -> CitedVerdict | None:
        """The label, its reasons, and each property judged with whose fault a failure is."""
        verdict = self._run_figures["verdict"]
        if verdict is None:
            return None
        return {"verdict": verdict.get("verdict"), "reasons": verdict.get("reasons"), "properties": verdict.get("properties"),
                "qualification": verdict.get("qualification")}  # fmt: skip


class CertificateOut(serializers.ModelSerializer[Certificate]):
    download = serializers.SerializerMethodField()

    class Meta:
        model = Certificate
        fields = [
            "id", "pair", "run", "verdict", "thresholds", "digest", "key_id", "issued_at", "expires_at", "expired_at",
            "reproduce", "hub_pr_url", "download", "revoked_at", "revocation_reason",
        ]  # fmt: skip

    def get_download(self, certificate: Certificate) -> str:
        """The exact signed file, for `spechub verify`."""
        return reverse("api-certificate-download", args=[certificate.pk])


class RegressionOut(serializers.ModelSerializer[Regression]):
    detectable_drop = serializers.SerializerMethodField(
        help_text="a drop (a fraction) a fresh comparison on this hardware flags at least half the time, every figure "
        "printed, wherever the timings scatter by up to 15 % (CV) and the pair moves no more than its run-to-run floor; "
        "a smaller one may be flagged too; null for AL, which is counted, not timed"
    )

    class Meta:
        model = Regression
        fields = ["id", "run", "previous_run", "metric", "previous", "current", "relative_change", "interval",
                  "detectable_drop", "detected_at"]  # fmt: skip

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_detectable_drop(self, regression: Regression) -> float | None:
        return regression_detectable(regression=regression)


# Every input field has a size limit: a repo id or revision is never longer than the columns that hold it.
ID_LENGTH = 200
