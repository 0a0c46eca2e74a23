"""Reads about certification runs: the spec and plan a run measures, its document, figures and summary, the queue."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.conf import settings
from django.db.models import Case, QuerySet, Value, When

from kernel import result
from kernel.spec import ModelRef, Plan, RunSpec, Thresholds, levels_for, most_pairs_for
from kernel.stats import DETECTABLE_LEAST_CPU, DETECTABLE_LEAST_GPU, detectable_drop
from registry.fleet.selectors import last_seen_on
from registry.models import (
    CertificationRun,
    Pair,
    Regression,
)
from registry.states import FINAL_STATES, RunState


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


class OwnMachinesWait(TypedDict):
    hardware: str
    last_seen: datetime | None  # when one of the owner's workers on the class last called; None: none ever did
    deadline: datetime  # the run fails (own-machines:no-worker) then, unless one of their workers comes first


def own_machines_wait(*, run: CertificationRun) -> OwnMachinesWait | None:
    """For a queued run on its owner's own machines only: whose workers it waits for, and until when. The wait starts
    again whenever one of their workers on its class calls the registry."""
    if not run.own_machines or run.state != RunState.QUEUED or run.workload is None:
        return None
    seen = last_seen_on(owner=run.workload.owner, hardware=run.hardware)
    since = max(run.created_at, seen) if seen else run.created_at
    wait = timedelta(seconds=settings.SPECHUB_OWN_MACHINES_WAIT_SECONDS)
    return {"hardware": run.hardware, "last_seen": seen, "deadline": since + wait}


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
    acceptance: result.Acceptance | None
    best_k: list[result.BestKRow]
    schedule: result.ServedSchedule | None
    starts: list[result.Start]


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
        "acceptance": result.acceptance(document),
        "best_k": result.best_k_rows(document),
        "schedule": result.served_schedule(document),
        "starts": result.starts(document),
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
    return lineage_runs_before(run=run).first()


def lineage_runs_before(*, run: CertificationRun) -> QuerySet[CertificationRun]:
    """Return the finished certifications of `run`'s lineage on its hardware before it, the latest first."""
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
    )


def lineage_block_ratios(*, run: CertificationRun, latest: int) -> list[list[list[float]]]:
    """Return the c=1 block ratios of the `latest` earlier certifications of `run`'s lineage, grouped by pair."""
    by_pair: dict[int, list[list[float]]] = {}
    for earlier in lineage_runs_before(run=run)[:latest]:
        by_pair.setdefault(earlier.pair_id, []).append(result.block_ratios(run_document(earlier)))
    return list(by_pair.values())


@dataclass(frozen=True)
class RegressionRow:
    regression: Regression
    detectable_percent: float | None  # a drop a fresh comparison flags at least half the time, in %; None if counted


def regression_rows(*, pair: Pair) -> list[RegressionRow]:
    """Return a pair's regressions, each with the drop its comparison could detect (read back from its interval)."""
    rows = pair.regressions.select_related("run", "previous_run__pair__draft")
    return [RegressionRow(r, None if (d := regression_detectable(regression=r)) is None else 100 * d) for r in rows]


def regression_detectable(*, regression: Regression) -> float | None:
    """A drop (a fraction) a fresh comparison on the run's hardware flags at least half the time, wherever the timings
    scatter by up to 15 % and the pair moves no more than its floor (kernel.stats.detectable_drop); None for a counted
    figure, which has no interval."""
    # The least is the hardware class's default plan's (kernel.spec.most_pairs_for, 4 pairs first): a deployment
    # that times more pairs is flagged more often at it.
    least = DETECTABLE_LEAST_CPU if regression.run.hardware == "cpu" else DETECTABLE_LEAST_GPU
    return detectable_drop(regression.interval, settings.SPECHUB_REGRESSION_RTOL, least=least)
