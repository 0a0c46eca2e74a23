"""Selectors: every read the pages, API and tasks make."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any, TypedDict

from django.conf import settings
from django.db.models import Case, QuerySet, Value, When
from django.urls import reverse
from django.utils import timezone

from kernel import result
from kernel.spec import ModelRef, Plan, RunSpec, Thresholds, levels_for, most_pairs_for
from registry.filters import PairFilter, filtered_pairs
from registry.models import (
    CertificationRun,
    EngineQualification,
    HubModel,
    Pair,
    Role,
    Submission,
    SubmissionSource,
    SubmissionStatus,
    WebhookEndpoint,
)
from registry.states import FINAL_STATES, RunState


def pairs_list(*, search: str = "") -> QuerySet[Pair]:
    """Return pairs, newest first, matching `search` on draft or verifier repo id."""
    pairs = Pair.objects.select_related("verifier", "draft")
    if search:
        pairs = pairs.filter(search__contains=search.upper())
    return pairs.order_by("-created_at", "-id")


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


def run_spec(*, run: CertificationRun) -> RunSpec:
    """Return the Django-free spec the director runs from."""
    pair = run.pair
    draft = ModelRef(pair.draft.repo_id, pair.draft.sha) if pair.draft else None
    plan = measuring_plan(run.hardware)
    if run.workload is not None:  # the worker reads it from the file the certify task leaves for this run
        asked = max((request["max_tokens"] for request in run.workload.sample), default=plan.output_tokens)
        # Timed requests ask for what the user's requests ask for (at least 16 tokens, so a figure is not start-up noise).
        plan = replace(plan, workloads=f"sha256:{run.workload.sha256}", output_tokens=max(16, asked))
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
        plan=plan,
    )


def measuring_plan(hardware: str = "cpu") -> Plan:
    """Return how runs on `hardware` measure on this deployment; the thresholds are the certificate's."""
    return Plan(
        workloads=settings.SPECHUB_WORKLOADS,
        concurrency=tuple(settings.SPECHUB_CONCURRENCY_LEVELS) or levels_for(hardware),
        repeats=settings.SPECHUB_REPEATS,
        most_pairs=settings.SPECHUB_MOST_PAIRS or most_pairs_for(hardware),
        half_width=settings.SPECHUB_HALF_WIDTH,
        half_width_loaded=settings.SPECHUB_HALF_WIDTH_LOADED,
        output_tokens=settings.SPECHUB_OUTPUT_TOKENS,
        dtype=settings.SPECHUB_ENGINE_DTYPE,
        smoke_engine_features=tuple(settings.SPECHUB_SMOKE_ENGINE_FEATURES) or None,
        thresholds=Thresholds(
            greedy_exact_match=settings.SPECHUB_THRESHOLD_EXACT_MATCH,
            sampling_alpha=settings.SPECHUB_THRESHOLD_SAMPLING_ALPHA,
            sampling_tv=settings.SPECHUB_THRESHOLD_SAMPLING_TV,
            min_speedup=settings.SPECHUB_THRESHOLD_MIN_SPEEDUP,
        ),
    )


def pairs_to_certify(*, pairs: list[Pair], limit: int | None = None) -> list[Pair]:
    """Return the first `limit` of `pairs` that have no finished public run yet."""
    return [pair for pair in pairs if not pair.runs.public().filter(state=RunState.FINISHED).exists()][:limit]


def latest_finished_run(*, pair: Pair, hardware: str | None = None) -> CertificationRun | None:
    """Return the pair's newest finished run (on `hardware` when given)."""
    runs = pair.runs.public().filter(state=RunState.FINISHED)
    if hardware:
        runs = runs.filter(hardware=hardware)
    return runs.order_by("-finished_at", "-id").first()


def run_document(run: CertificationRun | None) -> result.ResultDocument | None:
    """Return a run's result document, read (and upgraded) through kernel.result; None before it finishes."""
    return result.load(run.result) if run else None


class RunFigures(TypedDict):
    speed: list[result.SpeedAtLevel]
    measurement: result.Measurement | None
    latency: list[result.LatencyRow]
    verdict: result.Verdict | None
    properties: list[PropertyRow]
    smoke: result.Smoke | None
    precision: result.Precision | None


def run_figures(run: CertificationRun) -> RunFigures:
    """Return what the run page and API show of a run, its document read once: speed, measurement, latencies, verdict."""
    document = run_document(run)
    return {
        "speed": result.speed_by_level(document),
        "measurement": result.measurement(document),
        "latency": result.latency_rows(document),
        "verdict": result.verdict(document),
        "properties": property_rows(document),
        "smoke": result.smoke(document),
        "precision": result.precision(document),
    }


class PropertyRow(TypedDict):
    title: str
    outcome: str
    fault: str | None
    reason: str
    tone: str  # the badge colour: certified (good), provisional (undecided), failed (bad)
    digest: str | None  # the engine qualification the judgement cites


PROPERTY_TITLES = {"acceptance": "acceptance", "greedy": "greedy equivalence", "sampling": "sampling equivalence",
                   "speed": "speed at concurrency 1"}  # fmt: skip
TONES = {"measured": "certified", "pass": "certified", result.FASTER: "certified", "fail": "failed", result.SLOWER: "failed"}


def property_rows(document: result.ResultDocument | None) -> list[PropertyRow]:
    """Return the document's per-property verdicts as table rows; none for documents judged before they existed."""
    found = result.properties(document)
    if not found:
        return []
    rows: list[PropertyRow] = []
    for name, title in PROPERTY_TITLES.items():
        judged: result.PropertyVerdict = found[name]  # type: ignore[literal-required]
        cited = judged["evidence"].get("qualification") or {}
        rows.append({"title": title, "outcome": judged["outcome"], "fault": judged["fault"], "reason": judged["reason"],
                     "tone": TONES.get(judged["outcome"], "provisional"), "digest": cited.get("digest")})  # fmt: skip
    return rows


class RunSummary(result.Summary):
    run: int
    hardware: str


def run_summary(run: CertificationRun | None) -> RunSummary | None:
    """Return the headline figures of a finished run's result document (None when there is none)."""
    summary = result.summary(run_document(run))
    if run is None or summary is None:
        return None
    return {**summary, "run": run.pk, "hardware": run.hardware}


def compatibility_matrix() -> dict[str, Any]:
    """Return verifiers by drafts with the gate's verdict and the latest certification in each cell."""
    cells = [
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


def recommendations(*, verifier: str, hardware: str, concurrency: int, workload: str = "") -> list[dict[str, Any]]:
    """Rank the verifier's certified-or-measured pairs on `hardware` by speedup at `concurrency` (and workload).

    A per-workload speedup exists at concurrency 1 only; other levels use the suite-wide figure. A per-workload
    figure rests on one or two prompts per block and has no interval: its row says "indicative".
    """
    ranked = []
    for pair in pairs_list().filter(verifier__repo_id=verifier):
        summary = run_summary(latest_finished_run(pair=pair, hardware=hardware))
        if summary is None:
            continue
        if workload and concurrency == 1:
            speedup = summary["per_category_speedup"].get(workload)
        else:
            speedup = summary["speedup"].get(str(concurrency))
        if speedup is not None:
            draft = pair.draft.repo_id if pair.draft else pair.method
            indicative = bool(workload and concurrency == 1)
            ranked.append({"pair": pair.pk, "draft": draft, "method": pair.method, "speedup": speedup, "indicative": indicative,
                           **_verdict(summary)})  # fmt: skip
    return sorted(ranked, key=lambda r: (r["verdict"] != "certified", -r["speedup"]))


def _verdict(summary: RunSummary) -> dict[str, Any]:
    return {"verdict": summary["verdict"], "run": summary["run"], "mean_acceptance_length": summary["mean_acceptance_length"]}


EXPORT_COLUMNS = [
    "pair", "verifier", "verifier_sha", "draft", "draft_sha", "method", "k", "compatible",
    "run", "hardware", "vllm", "verdict", "mean_acceptance_length", "speedup_c1", "faster_up_to", "slower_from",
]  # fmt: skip


def export_rows() -> list[dict[str, Any]]:
    """Return one flat row per pair with its latest certification, for CSV and JSON export."""
    rows = []
    for pair in pairs_list().select_related("latest_run"):
        summary = run_summary(pair.latest_run)
        headline: dict[str, Any] = dict(summary) if summary else {}
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
                "run": headline.get("run"),
                "hardware": headline.get("hardware"),
                "vllm": headline.get("engine_build") or None,
                "verdict": headline.get("verdict"),
                "mean_acceptance_length": headline.get("mean_acceptance_length"),
                "speedup_c1": headline.get("speedup", {}).get("1"),
                "faster_up_to": headline.get("faster_up_to"),
                "slower_from": headline.get("slower_from"),
            }
        )
    return rows


def pair_page(*, pair: Pair) -> dict[str, Any]:
    """Return what the pair page shows: the latest certification's figures, run history, and the gate report."""
    run = latest_finished_run(pair=pair)
    document = run_document(run)
    levels, speedups = result.levels(document), result.speedups(document)
    return {
        "pair": pair,
        "run": run,
        "verdict": result.verdict(document) or {},
        "properties": property_rows(document),
        "smoke": result.smoke(document),
        "acceptance": result.acceptance(document) or {},
        "levels": levels,
        "speedups": [speedups[str(level)] for level in levels],
        "throughput": result.throughput(document) or {},
        "speed": result.speed_by_level(document),
        "break_even_bounds": result.break_even_bounds(document),
        "latency": result.latency_rows(document),
        "servers": result.servers(document),
        "load": result.machine_load(document),
        "results": list(run.results.all()) if run else [],
        "equivalence": result.equivalence(document) or {},
        "environment": result.environment(document),
        "history": list(pair.runs.public().order_by("-created_at", "-id")[:50]),
        "gate": pair.compatibility or {},
        "certificate": pair.certificates.filter(run__workload__isnull=True).first(),
        "regressions": list(pair.regressions.select_related("previous_run__pair__draft")),
        "rtol_percent": round(settings.SPECHUB_REGRESSION_RTOL * 100, 2),
    }


def submission_window() -> timedelta:
    """Return the window SPECHUB_SUBMISSION_RATE ('20/hour') counts submissions over."""
    period = settings.SPECHUB_SUBMISSION_RATE.split("/")[1]
    return timedelta(seconds={"s": 1, "m": 60, "h": 3600, "d": 86400}[period[0]])


def submission_quota(*, user: Any) -> dict[str, int | str]:
    """Return how many submissions the user made in the rate window, and the limit (SPECHUB_SUBMISSION_RATE)."""
    count, period = settings.SPECHUB_SUBMISSION_RATE.split("/")
    used = Submission.objects.filter(submitted_by=user, created_at__gte=timezone.now() - submission_window()).count()
    return {"used": used, "limit": int(count), "period": period}


def runs_queue(*, user: Any) -> QuerySet[CertificationRun]:
    """Return the runs `user` may see: those still going first (oldest first, as the queue serves them), then newest first."""
    going = Case(When(state__in=[s.value for s in FINAL_STATES], then=Value(1)), default=Value(0))
    return (
        CertificationRun.objects.visible_to(user)
        .select_related("pair__verifier", "pair__draft")
        .annotate(finished=going)
        .order_by("finished", "-created_at", "-id")
    )


# The headline figures regressions are judged on, read from a finished run's result document.
HEADLINE_METRICS = ("mean_acceptance_length", "speedup")


def run_headline(*, run: CertificationRun) -> dict[str, float | None]:
    """Return a finished run's AL and its speedup at concurrency 1 (None where not measured)."""
    summary = run_summary(run)
    if summary is None:
        return dict.fromkeys(HEADLINE_METRICS)
    return {"mean_acceptance_length": summary["mean_acceptance_length"], "speedup": summary["speedup"].get("1")}


def previous_lineage_run(*, run: CertificationRun) -> CertificationRun | None:
    """Return the certification before `run` of the same draft and verifier repos, method and k, on the same hardware.

    Revisions are deliberately not part of the lineage: a new draft revision is compared with the old one.
    """
    pair = run.pair
    return (
        CertificationRun.objects.public()
        .filter(
            state=RunState.FINISHED,
            hardware=run.hardware,
            pair__verifier__repo_id=pair.verifier.repo_id,
            pair__draft__repo_id=pair.draft.repo_id if pair.draft else None,
            pair__method=pair.method,
            pair__num_speculative_tokens=pair.num_speculative_tokens,
            finished_at__lt=run.finished_at,
        )
        .exclude(pk=run.pk)
        .order_by("-finished_at", "-id")
        .first()
    )


def pair_owner(*, pair: Pair) -> Any:
    """Return the user whose submission first produced the pair, or None for pairs SpecHub added itself."""
    # The submission that created the pair: a later duplicate (of a pair SpecHub added itself, say)
    # makes nobody its owner.
    submission = (
        pair.submissions.filter(submitted_by__isnull=False, status=SubmissionStatus.ACCEPTED).order_by("created_at", "id").first()
    )
    return submission.submitted_by if submission else None


def webhooks_of(*, owner: Any) -> QuerySet[WebhookEndpoint]:
    """Return the owner's webhook endpoints, newest first."""
    return WebhookEndpoint.objects.filter(owner=owner).order_by("-created_at", "-id")


def pair_public_url(*, pair: Pair) -> str:
    """Return the pair page's absolute address, for emails, webhooks and Hub PRs."""
    return f"{settings.SPECHUB_PUBLIC_URL.rstrip('/')}{reverse('pair', args=[pair.pk])}"


def qualification_for(*, engine: str, engine_build: str, hardware: str, dtype: str) -> EngineQualification | None:
    """Return the newest qualification of this engine build on this hardware class and dtype."""
    found = EngineQualification.objects.filter(engine=engine, engine_build=engine_build, hardware=hardware, dtype=dtype)
    return found.first()


def engine_qualifications() -> list[EngineQualification]:
    """Return the newest qualification of each engine build x hardware class x dtype, newest first."""
    newest: dict[tuple[str, str, str, str], EngineQualification] = {}
    for row in EngineQualification.objects.all():  # ordered newest first: the first seen is kept
        newest.setdefault((row.engine, row.engine_build, row.hardware, row.dtype), row)
    return list(newest.values())


def qualification_by_digest(*, digest: str) -> EngineQualification | None:
    return EngineQualification.objects.filter(digest=digest).first()


class ControlRow(TypedDict):
    name: str
    method: str | None
    draft: str | None
    outcome: str
    summary: str
    tests: list[dict[str, Any]]  # one per mode and probe: p-value, samples, and the TV it detects


class BuildPage(TypedDict):
    qualification: EngineQualification
    controls: list[ControlRow]
    not_judgeable: list[str]  # the methods whose pairs' sampling cannot be judged on this build


def engines_page() -> list[BuildPage]:
    """Return each qualified build with its controls' tests flattened for a table, and what they mean for pairs."""
    pages: list[BuildPage] = []
    for row in engine_qualifications():
        controls = row.document["controls"]
        rows: list[ControlRow] = [
            {**{k: c.get(k) for k in ("name", "method", "draft", "outcome", "summary")},  # type: ignore[typeddict-item]
             "tests": [{"mode": m["mode"], **p} for m in c["sampling"] for p in m["probes"]]}
            for c in controls
        ]  # fmt: skip
        failing = {c["method"] for c in controls if c["outcome"] == "fail"}
        every = sorted(m for m in {c["method"] for c in controls} if m) if None in failing else sorted(failing - {None})
        pages.append({"qualification": row, "controls": rows, "not_judgeable": every})
    return pages


def hub_imports() -> QuerySet[Submission]:
    """Return the Hub import's submissions, newest first, with their pairs."""
    found = Submission.objects.filter(source=SubmissionSource.HUB_IMPORT).select_related("pair", "pair__verifier")
    return found.order_by("-created_at", "-id")
