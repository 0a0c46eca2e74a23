"""Selectors: every read the pages, API and tasks make."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Q, QuerySet

from registry.models import CertificationRun, Pair
from workers.spec import ModelRef, Plan, RunSpec, Thresholds


def pairs_list(*, search: str = "") -> QuerySet[Pair]:
    """Return pairs, newest first, matching `search` on draft or verifier repo id."""
    pairs = Pair.objects.select_related("verifier", "draft")
    if search:
        pairs = pairs.filter(Q(draft__repo_id__icontains=search) | Q(verifier__repo_id__icontains=search))
    return pairs.order_by("-created_at", "-id")


def run_spec(*, run: CertificationRun) -> RunSpec:
    """Return the Django-free spec the director runs from."""
    pair = run.pair
    draft = ModelRef(pair.draft.repo_id, pair.draft.sha) if pair.draft else None
    return RunSpec(
        run_id=run.pk,
        attempt=run.attempts,
        verifier=ModelRef(pair.verifier.repo_id, pair.verifier.sha),
        draft=draft,
        method=pair.method,
        num_speculative_tokens=pair.num_speculative_tokens,
        engine=run.engine,
        hardware=run.hardware,
        verifier_dtype=pair.verifier_dtype,
        draft_dtype=pair.draft_dtype,
        options=dict(pair.options),
        plan=measuring_plan(),
    )


def measuring_plan() -> Plan:
    """Return how runs measure on this deployment; the thresholds are the certificate's."""
    return Plan(
        workloads=settings.SPECHUB_WORKLOADS,
        concurrency=tuple(settings.SPECHUB_CONCURRENCY_LEVELS),
        repeats=settings.SPECHUB_REPEATS,
        dtype=settings.SPECHUB_ENGINE_DTYPE,
        thresholds=Thresholds(
            greedy_exact_match=settings.SPECHUB_THRESHOLD_EXACT_MATCH,
            sampling_alpha=settings.SPECHUB_THRESHOLD_SAMPLING_ALPHA,
            min_speedup=settings.SPECHUB_THRESHOLD_MIN_SPEEDUP,
        ),
    )
