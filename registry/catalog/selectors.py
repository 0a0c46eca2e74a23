"""Reads about pairs: the catalog, its filters and choices, the compatibility matrix, recommendations, the export,
a pair's page."""

from __future__ import annotations

from typing import Any, TypedDict

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse

from kernel import result
from registry.catalog.filters import PairFilter, filtered_pairs
from registry.fleet.selectors import measured_on
from registry.models import (
    Certificate,
    CertificationRun,
    HubModel,
    Pair,
    Role,
    Submission,
    SubmissionSource,
    SubmissionStatus,
    WorkloadResult,
)
from registry.runs.selectors import (
    PropertyRow,
    RegressionRow,
    RunSummary,
    latest_finished_run,
    property_rows,
    regression_rows,
    run_document,
    run_summary,
)
from registry.states import RunState


class MatrixCell(TypedDict):
    pair: int
    verifier: str
    draft: str  # the draft's repo id, or the method for a draft-free pair (ngram)
    compatible: bool | None  # the gate's verdict; None before the gate ran
    verdict: str | None  # the latest certification, copied onto the pair when it finished


class Matrix(TypedDict):
    """Verifiers by drafts: the axes, sorted, and one cell per pair."""

    verifiers: list[str]
    drafts: list[str]
    cells: list[MatrixCell]


class Recommendation(TypedDict):
    pair: int
    draft: str
    method: str
    speedup: float
    indicative: bool  # a per-workload figure at c=1: one or two prompts per block, no interval
    verdict: str | None
    run: int
    mean_acceptance_length: float | None
    serve: str | None


class ExportRow(TypedDict):
    """One pair and its latest certification, flat, as the CSV and JSON export write it."""

    pair: int
    verifier: str
    verifier_sha: str
    draft: str
    draft_sha: str
    method: str
    k: int
    compatible: bool | None
    run: int | None
    hardware: str | None
    vllm: str | None
    verdict: str | None
    mean_acceptance_length: float | None
    speedup_c1: float | None
    faster_up_to: int | None
    slower_from: int | None
    measured_on: str | None  # hosted, or self-hosted on worker_owner's `worker`
    worker: str | None
    worker_owner: str | None
    revoked_at: str | None  # the latest certification's certificate, when revoked
    revocation_reason: str | None


class PairPage(TypedDict):
    """What the pair page shows: the latest certification's figures, run history, and the gate report."""

    pair: Pair
    run: CertificationRun | None
    verdict: result.Verdict | None
    properties: list[PropertyRow]
    smoke: result.Smoke | None
    acceptance: result.Acceptance | None
    levels: list[int]
    speedups: list[float]
    throughput: result.Throughput | None
    speed: list[result.SpeedAtLevel]
    break_even_bounds: tuple[int | None, int | None]
    latency: list[result.LatencyRow]
    servers: result.Servers | None
    best_k: list[result.BestKRow]
    other_recipes: list[tuple[int, str]]  # the measured k's other than the best, each with its `vllm serve` line
    load: result.MachineLoad | None
    results: list[WorkloadResult]
    equivalence: result.Equivalence | None
    environment: result.Environment
    history: list[CertificationRun]
    gate: dict[str, object]  # the gate report as the pair stores it (JSON)
    certificate: Certificate | None
    regressions: list[RegressionRow]
    rtol_percent: float


def pairs_list(*, search: str = "") -> QuerySet[Pair]:
    """Return pairs, newest first, matching `search` on draft or verifier repo id."""
    pairs = Pair.objects.select_related("verifier", "draft")
    if search:
        pairs = pairs.filter(search__contains=search.upper())
    return pairs.order_by("-created_at", "-id")


def pairs_listed() -> QuerySet[Pair]:
    """Return `pairs_list()` with only the columns the API's pair list shows: a pair's gate report and format
    metadata, and each model's parsed config, can each be kilobytes of JSON, decoded for every row of every page."""
    return pairs_list().defer(
        "verifier_dtype", "draft_dtype", "format_metadata", "compatibility", "identity", "search",
        "verifier__config", "verifier__created_at", "draft__config", "draft__created_at",
    )  # fmt: skip


def pairs_filtered(*, params: Any) -> tuple[PairFilter, QuerySet[Pair]]:
    """Return the catalog's bound filter and the pairs it selects, in its sort order."""
    return filtered_pairs(params, pairs_list())


def catalog_choices() -> dict[str, list[str]]:
    """Return the values present for the free-text filters (families, hardware, engine versions)."""
    return {
        "families": sorted(set(HubModel.objects.filter(role=Role.VERIFIER).exclude(family="").values_list("family", flat=True))),
        "hardware": sorted(set(Pair.objects.exclude(hardware="").values_list("hardware", flat=True))),
        "engine_versions": sorted(set(Pair.objects.exclude(engine_version="").values_list("engine_version", flat=True))),
    }


def pairs_to_certify(*, pairs: list[Pair], limit: int | None = None) -> list[Pair]:
    """Return the first `limit` of `pairs` that have no finished public run yet."""
    return [pair for pair in pairs if not pair.runs.public().filter(state=RunState.FINISHED).exists()][:limit]


def compatibility_matrix() -> Matrix:
    """Return verifiers by drafts with the gate's verdict and the latest certification in each cell."""
    cells: list[MatrixCell] = [
        {
            "pair": pair.pk,
            "verifier": pair.verifier.repo_id,
            "draft": pair.draft.repo_id if pair.draft else pair.method,
            "compatible": (pair.compatibility or {}).get("compatible"),
            "verdict": pair.verdict or None,  # the latest certification, copied onto the pair when it finished
        }
        for pair in pairs_list()
    ]
    return {
        "verifiers": sorted({c["verifier"] for c in cells}),
        "drafts": sorted({c["draft"] for c in cells}),
        "cells": cells,
    }


def recommendations(*, verifier: str, hardware: str, concurrency: int, workload: str = "") -> list[Recommendation]:
    """Rank the verifier's certified-or-measured pairs on `hardware` by speedup at `concurrency` (and workload).

    A per-workload speedup exists at concurrency 1 only; other levels use the suite-wide figure. A per-workload
    figure rests on one or two prompts per block and has no interval: its row says "indicative".
    """
    ranked: list[Recommendation] = []
    revoked = set(Certificate.objects.filter(revoked_at__isnull=False).values_list("run_id", flat=True))
    for pair in pairs_list().filter(verifier__repo_id=verifier):
        summary = run_summary(latest_finished_run(pair=pair, hardware=hardware))
        if summary is None or summary["run"] in revoked:  # a revoked result is never recommended
            continue
        if workload and concurrency == 1:
            speedup = summary["per_category_speedup"].get(workload)
        else:
            speedup = summary["speedup"].get(str(concurrency))
        if speedup is not None:
            indicative = bool(workload and concurrency == 1)
            ranked.append(_recommendation(pair, speedup, indicative, summary))
    return sorted(ranked, key=lambda r: (r["verdict"] != "certified", -r["speedup"]))


def _recommendation(pair: Pair, speedup: float, indicative: bool, summary: RunSummary) -> Recommendation:
    return {"pair": pair.pk, "draft": pair.draft.repo_id if pair.draft else pair.method, "method": pair.method,
            "speedup": speedup, "indicative": indicative, "verdict": summary["verdict"], "run": summary["run"],
            "mean_acceptance_length": summary["mean_acceptance_length"], "serve": summary["serve"]}  # fmt: skip


EXPORT_COLUMNS = [
    "pair", "verifier", "verifier_sha", "draft", "draft_sha", "method", "k", "compatible",
    "run", "hardware", "vllm", "verdict", "mean_acceptance_length", "speedup_c1", "faster_up_to", "slower_from",
    "measured_on", "worker", "worker_owner", "revoked_at", "revocation_reason",
]  # fmt: skip


def export_rows() -> list[ExportRow]:
    """Return one flat row per pair with its latest certification, for CSV and JSON export."""
    rows: list[ExportRow] = []
    revoked = {c.run_id: c for c in Certificate.objects.filter(revoked_at__isnull=False).only("run_id", "revoked_at",
                                                                                               "revocation_reason")}  # fmt: skip
    for pair in pairs_list().select_related("latest_run__worker__owner"):
        headline = run_summary(pair.latest_run)
        where = measured_on(pair.latest_run) if pair.latest_run else None
        revocation = revoked.get(pair.latest_run_id) if pair.latest_run_id else None
        rows.append(
            {
                "pair": pair.pk,
                "verifier": pair.verifier.repo_id,
                "verifier_sha": pair.verifier.sha,
                "draft": pair.draft.repo_id if pair.draft else "",
                "draft_sha": pair.draft.sha if pair.draft else "",
                "method": pair.method,
                "k": pair.num_speculative_tokens,
                "compatible": (pair.compatibility or {}).get("compatible"),
                "run": headline["run"] if headline else None,
                "hardware": headline["hardware"] if headline else None,
                "vllm": (headline["engine_build"] or None) if headline else None,
                "verdict": headline["verdict"] if headline else None,
                "mean_acceptance_length": headline["mean_acceptance_length"] if headline else None,
                "speedup_c1": headline["speedup"].get("1") if headline else None,
                "faster_up_to": headline["faster_up_to"] if headline else None,
                "slower_from": headline["slower_from"] if headline else None,
                "measured_on": where["kind"] if where else None,  # hosted, or self-hosted on worker_owner's `worker`
                "worker": where["worker"] if where else None,
                "worker_owner": where["owner"] if where else None,
                "revoked_at": revocation.revoked_at.isoformat() if revocation and revocation.revoked_at else None,
                "revocation_reason": revocation.revocation_reason if revocation else None,
            }
        )
    return rows


def pair_page(*, pair: Pair) -> PairPage:
    """Return what the pair page shows: the latest certification's figures, run history, and the gate report."""
    run = latest_finished_run(pair=pair)
    document = run_document(run)
    levels, speedups = result.levels(document), result.speedups(document)
    return {
        "pair": pair,
        "run": run,
        "verdict": result.verdict(document),
        "properties": property_rows(document),
        "smoke": result.smoke(document),
        "acceptance": result.acceptance(document),
        "levels": levels,
        "speedups": [speedups[str(level)] for level in levels],
        "throughput": result.throughput(document),
        "speed": result.speed_by_level(document),
        "break_even_bounds": result.break_even_bounds(document),
        "latency": result.latency_rows(document),
        "servers": result.servers(document),
        "best_k": (best_k := result.best_k_rows(document)),
        "other_recipes": _other_recipes(document, best_k),
        "load": result.machine_load(document),
        "results": list(run.results.all()) if run else [],
        "equivalence": result.equivalence(document),
        "environment": result.environment(document),
        "history": list(pair.runs.public().select_related("worker__owner").order_by("-created_at", "-id")[:50]),
        "gate": pair.compatibility or {},
        "certificate": pair.certificates.filter(run__workload__isnull=True).first(),
        "regressions": regression_rows(pair=pair),
        "rtol_percent": round(settings.SPECHUB_REGRESSION_RTOL * 100, 2),
    }


def _other_recipes(document: result.ResultDocument | None, best_k: list[result.BestKRow]) -> list[tuple[int, str]]:
    """The measured k's other than the best at the lowest level, each with its `vllm serve` line."""
    measured = result.throughput(document)
    choice = measured.get("choice_of_k") if measured else None
    if not choice or not best_k:
        return []
    return [
        (int(k), line)
        for k, line in sorted(choice["recipes"].items(), key=lambda item: int(item[0]))
        if int(k) != best_k[0]["best_k"]
    ]


def pair_owner(*, pair: Pair) -> Any:
    """Return the user whose submission first produced the pair, or None for pairs SpecHub added itself."""
    # The submission that created the pair: a later duplicate (of a pair SpecHub added itself, say)
    # makes nobody its owner.
    submission = (
        pair.submissions.filter(submitted_by__isnull=False, status=SubmissionStatus.ACCEPTED).order_by("created_at", "id").first()
    )
    return submission.submitted_by if submission else None


def pair_public_url(*, pair: Pair) -> str:
    """Return the pair page's absolute address, for emails, webhooks and Hub PRs."""
    return f"{settings.SPECHUB_PUBLIC_URL.rstrip('/')}{reverse('pair', args=[pair.pk])}"


def hub_imports() -> QuerySet[Submission]:
    """Return the Hub import's submissions, newest first, with their pairs."""
    found = Submission.objects.filter(source=SubmissionSource.HUB_IMPORT).select_related("pair", "pair__verifier")
    return found.order_by("-created_at", "-id")
