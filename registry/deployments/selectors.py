"""Reads for deployments: whose they are, what they claim to run as certified, and their live windows over time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict

from django.db.models import Count, F, Max, Min, Q, QuerySet, Sum
from django.http import Http404

from kernel import diagnosis, live, live_diagnosis, result
from registry.models import CertificationRun, Deployment, LiveSnapshot
from registry.runs.selectors import run_document
from registry.states import FINAL_STATES, RunState

# Looking back from the newest window for enough steps and requests to judge, no further than this.
JUDGE_SPAN_SECONDS = 3600


def deployments_of(*, user: Any) -> QuerySet[Deployment]:
    """The user's deployments (every one for staff)."""
    rows = Deployment.objects.select_related("pair__verifier", "pair__draft", "certificate", "workload")
    return rows if getattr(user, "is_staff", False) else rows.filter(owner=user)


def deployment_for(*, user: Any, pk: int) -> Deployment:
    """The user's deployment `pk`; anyone else's, or none, is a 404 (never a 403 that confirms it exists)."""
    found = deployments_of(user=user).filter(pk=pk).first() if getattr(user, "is_authenticated", False) else None
    if found is None:
        raise Http404("No such deployment.")
    return found


def deployment_by_token(*, pk: int, token_hash: str) -> Deployment | None:
    """Deployment `pk` if its ingest token hashes to `token_hash`, with its owner (whose account must be active)."""
    return Deployment.objects.select_related("pair", "owner").filter(pk=pk, token_hash=token_hash).first()


def deployment_owned(*, user: Any, pk: int) -> Deployment:
    """The user's own deployment `pk`, for what only its owner may do (staff too get a 404 for another's)."""
    found = deployments_of(user=user).filter(pk=pk, owner_id=user.pk).first() if user.is_authenticated else None
    if found is None:
        raise Http404("No such deployment.")
    return found


def certified_run(*, deployment: Deployment) -> CertificationRun | None:
    """The run the deployment is held to: its certificate's, else the pair's latest finished run on its workload
    (or on the public suite)."""
    if deployment.certificate_id is not None and deployment.certificate is not None:
        return deployment.certificate.run
    runs = CertificationRun.objects.filter(pair=deployment.pair, state=RunState.FINISHED)
    runs = runs.filter(workload=deployment.workload) if deployment.workload_id else runs.filter(workload__isnull=True)
    return runs.order_by("-finished_at", "-id").first()


def certified_for(*, deployment: Deployment) -> live.Certified | None:
    """The certified band (AL's interval over the suite's, or the workload's, prompts), k and engine build."""
    run = certified_run(deployment=deployment)
    try:
        acceptance = result.acceptance(run_document(run))
    except result.UnreadableResult:  # a document this code cannot read certifies nothing it can hold a deployment to
        return None
    figures = at_temperature(acceptance, deployment.temperature) if acceptance else None
    if run is None or figures is None or (al := figures.get("mean_acceptance_length")) is None:
        return None
    interval = figures.get("mean_acceptance_length_interval")  # absent without per-prompt counts: no band, not a point
    band = (interval[0], interval[1]) if interval else None
    return live.Certified(band=band, k=deployment.pair.num_speculative_tokens, engine_version=run.engine_version or None,
                          per_position=tuple(figures.get("per_position") or ()), al=al)  # fmt: skip


def low_window_causes(*, deployment: Deployment, verdict: str, counts: live.Counts, k_served: int | None) -> str:
    """For a window that reads "collapse", or "below" with AL near 1: what the counters show of the causes of a low
    acceptance, and what to check of the rest against the certified run (issue 53 §3); "" for any other window."""
    if not live_diagnosis.is_low(verdict, counts):
        return ""
    run = certified_run(deployment=deployment)
    document: Any = run.result if run is not None else None
    certified = None
    if isinstance(document, dict) and isinstance(document.get("spec"), dict) and isinstance(document.get("stages"), dict):
        certified = diagnosis.served_by(document["spec"], document["stages"])
    found = live_diagnosis.named(counts, k_served, deployment.pair.num_speculative_tokens, certified)
    return live_diagnosis.text(found)


def at_temperature(acceptance: result.Acceptance, temperature: float) -> result.Acceptance | result.AtTemperature | None:
    """The certified acceptance at a serving temperature: the greedy figures at 0, else the row measured at it."""
    if not temperature:
        return acceptance
    return next((row for row in acceptance.get("by_temperature", []) if row["temperature"] == temperature), None)


def temperatures_measured(*, deployment: Deployment) -> list[float]:
    """The temperatures the deployment's certified run measured acceptance at: 0 (greedy), and the sampled ones."""
    run = certified_run(deployment=deployment)
    try:
        acceptance = result.acceptance(run_document(run)) if run is not None else None
    except result.UnreadableResult:
        return []
    rows = acceptance.get("by_temperature", []) if acceptance else []
    return [0.0, *(row["temperature"] for row in rows if row["temperature"])]


def recertification_pending(*, deployment: Deployment) -> CertificationRun | None:
    """The run queued or going for the deployment's pair on its certified run's hardware (and workload), if any."""
    held = certified_run(deployment=deployment)
    if held is None:
        return None
    runs = CertificationRun.objects.filter(pair=deployment.pair_id, hardware=held.hardware, workload=held.workload_id)
    return runs.exclude(state__in=FINAL_STATES).order_by("-created_at", "-id").first()


def latest_snapshot(*, deployment: Deployment) -> LiveSnapshot | None:
    return LiveSnapshot.objects.filter(deployment=deployment).order_by("-read_at", "-id").first()


def as_snapshot(row: LiveSnapshot) -> live.Snapshot:
    return live.Snapshot(row.read_at.timestamp(), row.drafts, row.draft_tokens, row.accepted, tuple(row.per_position),
                         row.requests, row.started_at, row.engine_version or None, len(row.per_position) or None)  # fmt: skip


def trailing_counts(*, deployment: Deployment, newest: LiveSnapshot | None) -> live.Counts:
    """The windows back from `newest`, summed until there are enough steps and requests to judge (or the span ends)."""
    return trailing_spans(deployment=deployment, newest=newest, count=1)[0]


def trailing_spans(*, deployment: Deployment, newest: LiveSnapshot | None, count: int = 2) -> list[live.Counts]:
    """The judged span back from `newest` and up to `count` - 1 before it, newest first, each the windows summed
    until there are enough steps and requests to judge (the oldest may fall short where the hour ends)."""
    if newest is None:
        return [live.Counts()]
    rows = LiveSnapshot.objects.filter(deployment=deployment, read_epoch__gte=newest.read_epoch - JUDGE_SPAN_SECONDS)
    spans = [live.Counts()]
    fields = ("w_drafts", "w_accepted", "w_requests", "w_per_position")
    for drafts, accepted, requests, positions in rows.order_by("-read_epoch", "-id").values_list(*fields)[:1000]:
        spans[-1] = spans[-1] + live.Counts(drafts, 0, accepted, tuple(positions), requests)
        if spans[-1].drafts >= live.MIN_DRAFTS and spans[-1].requests >= live.MIN_REQUESTS:
            if len(spans) == count:
                break
            spans.append(live.Counts())
    return [span for span in spans if span.drafts or span.requests] or [live.Counts()]


class Point(TypedDict):
    """One stretch of the timeline: the windows that ended in it, summed, and their verdict."""

    start: datetime
    end: datetime
    drafts: int
    requests: int
    al: float | None
    interval: list[float]
    verdict: str
    reason: str
    unseen_drop: float | None  # the true AL's relative fall this stretch's traffic could hide, beside "within"
    restarts: int


def timeline(*, deployment: Deployment, certified: live.Certified | None, since: datetime, points: int = 120) -> list[Point]:
    """The windows since `since`, summed into at most `points` stretches of equal width (one aggregate query, so a
    year of stored windows reads as fast as a day)."""
    rows = LiveSnapshot.objects.filter(deployment=deployment, read_epoch__gte=int(since.timestamp()))
    span = rows.aggregate(first=Min("read_epoch"), last=Max("read_epoch"))
    if span["first"] is None:
        return []
    width = max(60, math.ceil((span["last"] - span["first"] + 1) / points))
    buckets = (
        rows.annotate(bucket=(F("read_epoch") - span["first"]) / width)
        .values("bucket")
        .annotate(
            drafts=Sum("w_drafts"),
            accepted=Sum("w_accepted"),
            second=Sum("w_second"),
            requests=Sum("w_requests"),
            start=Min("read_epoch"),
            end=Max("read_epoch"),
            restarts=Count("id", filter=Q(w_reset=True)),
        )
        .order_by("bucket")
    )
    found: list[Point] = []
    before: live.Counts | None = None
    for bucket in buckets:
        counts = live.Counts(bucket["drafts"], 0, bucket["accepted"], (), bucket["requests"], bucket["second"])
        found.append(_point(bucket, counts, certified, before))
        before = counts
    return found


def _point(bucket: Mapping[str, Any], counts: live.Counts, certified: live.Certified | None, before: live.Counts | None) -> Point:
    interval = live.al_interval(counts, certified.k if certified else None)
    unseen = None
    if certified is None:
        verdict, reason = "not certified", "no finished certification of the pair to hold it to"
    else:
        verdict, reason = live.judge(counts, certified, k=None, engine_version=None, before=before)
        unseen = live.unseen_drop(counts, certified) if verdict == live.WITHIN else None
    return {
        "start": datetime.fromtimestamp(bucket["start"], UTC),
        "end": datetime.fromtimestamp(bucket["end"], UTC),
        "drafts": counts.drafts,
        "requests": counts.requests,
        "al": live.acceptance_length(counts),
        "interval": list(interval) if interval else [],
        "verdict": verdict,
        "reason": reason,
        "unseen_drop": unseen,
        "restarts": bucket["restarts"],
    }


class PositionRow(TypedDict):
    position: int
    live: float
    interval: list[float]
    certified: float | None


def positions_now(*, deployment: Deployment, certified: live.Certified | None) -> list[PositionRow]:
    """Each position's live acceptance rate over the judged span (cumulative, with Wilson's interval over its
    drafting steps), beside the certified run's."""
    counts = trailing_counts(deployment=deployment, newest=latest_snapshot(deployment=deployment))
    held = certified.per_position if certified else ()
    rows: list[PositionRow] = []
    for index, (rate, reached) in enumerate(zip(live.position_rates(counts), counts.per_position, strict=True)):
        interval = live.rate_interval(reached, counts.drafts)
        rows.append({"position": index + 1, "live": rate, "interval": list(interval) if interval else [],
                     "certified": held[index] if index < len(held) else None})  # fmt: skip
    return rows
