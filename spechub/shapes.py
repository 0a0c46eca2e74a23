"""The shapes of SpecHub's REST answers, as the client reads them, and of the config file's settings.

Each TypedDict is an answer, or a part of one, as the server's OpenAPI schema publishes it: a component (RunOut is
`Run`, SubmissionOut `Submission`) or a shape the answer declares inline. tests/test_client_shapes.py holds every key
named here to that schema: a field renamed on the server fails a test rather than a user's `spechub` command.

Dates are ISO 8601 strings, as the JSON carries them. What the server keeps as a free-form document (a pair's gate
report, a run's acceptance figures and schedule, evidence) stays `dict[str, object]`.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

# --- The config file ------------------------------------------------------------------------------


class Settings(TypedDict, total=False):
    """~/.config/spechub/config.toml: either key may be absent (SPECHUB_URL and SPECHUB_TOKEN stand in)."""

    url: str
    token: str


# --- A run (RunOut) and what it holds -------------------------------------------------------------


class MeasuredOn(TypedDict):
    kind: Literal["hosted", "self-hosted"]
    worker: str | None
    owner: str | None
    engine_build: str | None
    evidence: dict[str, object] | None


class Property(TypedDict):
    outcome: str
    fault: str | None  # pair, engine, or None when it cannot be told
    reason: str
    evidence: dict[str, object]


class QualificationCited(TypedDict):
    digest: str
    engine: str
    engine_build: str
    hardware: str
    dtype: str


class Verdict(TypedDict):
    verdict: str  # certified, provisional or failed
    reasons: list[str]
    # By name: acceptance, greedy, sampling, speed (a newer server may add one); None for runs judged before them.
    properties: dict[str, Property] | None
    qualification: QualificationCited | None


class Speed(TypedDict):
    concurrency: int
    speedup: float
    interval: list[float]  # 95 %; empty where the level was not timed in pairs
    supports: str
    baseline_tokens_per_second: float | None
    speculative_tokens_per_second: float | None
    pairs: int


class KSpeed(TypedDict):
    k: int
    mean_acceptance_length: float
    predicted_speedup: float


class BestK(TypedDict):
    concurrency: int
    best_k: int
    predicted: list[KSpeed]
    predicted_speedup: float
    measured_speedup: float | None
    interval: list[float]
    supports: str
    pairs: int
    recipe: str | None


class Percentiles(TypedDict, total=False):
    """Milliseconds; empty for the side a run's document did not measure (the other side's row is still sent)."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None


class Latency(TypedDict):
    where: str
    metric: str  # ttft, tpot, itl or e2e
    baseline: Percentiles
    speculative: Percentiles


class Measurement(TypedDict):
    mode: str | None
    recipe: str | None
    baseline_recipe: str | None
    output_tokens: int | None
    request_rate: float | None
    latency_speedup: float | None
    latency_speedup_interval: list[float]
    counters_agree: bool | None
    load: dict[str, object] | None


class SmokeFeature(TypedDict):
    feature: str
    outcome: str
    detail: str
    divergence: NotRequired[dict[str, object]]  # only where outputs differed
    error: NotRequired[str]  # only where the engine refused


class Smoke(TypedDict):
    features: list[SmokeFeature]
    seconds: float


class WorkloadResult(TypedDict):
    category: str
    mean_acceptance_length: float | None
    acceptance_rate: float | None
    greedy_exact_match: float | None
    indicative_speedup: float | None
    acceptance: dict[str, object] | None
    equivalence: dict[str, object]


class Run(TypedDict):
    """GET /api/v1/runs/<id>/, each of the runs' list, and each run a workload's certification queues."""

    id: int
    pair: int
    workload: int | None
    engine: str
    engine_version: str
    hardware: str
    measured_on: MeasuredOn
    trigger: str
    priority: int
    dispatched_at: str | None
    state: str  # spechub.client.FINAL_STATES are the ends
    stage: str
    progress: int  # percent
    attempts: int
    max_attempts: int
    heartbeat_at: str | None
    error_code: str
    error_message: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    verdict: Verdict | None
    acceptance: dict[str, object] | None
    speed: list[Speed]
    best_k: list[BestK]
    schedule: dict[str, object] | None
    latency: list[Latency]
    measurement: Measurement | None
    smoke: Smoke | None
    results: list[WorkloadResult]


class RunPage(TypedDict):
    """GET /api/v1/runs/: one page, newest first."""

    count: int
    next: str | None
    previous: str | None
    results: list[Run]


# --- A submission, a pair and its certificate -----------------------------------------------------


class Submission(TypedDict):
    """POST /api/v1/submissions/."""

    id: int
    repo_id: str
    revision: str
    verifier_repo_id: str
    verifier_revision: str
    status: str  # pending, accepted, duplicate or refused
    refusal_code: str
    refusal_message: str
    validation_report: dict[str, object]
    pair: int | None
    run: int | None  # the queued run, when one was queued
    created_at: str


class HubModel(TypedDict):
    id: int
    repo_id: str
    sha: str
    role: str
    architecture: str
    family: str
    parameter_count: int | None
    dtype: str
    license: str
    tokenizer_hash: str


class Certificate(TypedDict):
    id: int
    pair: int
    run: int
    verdict: str
    thresholds: dict[str, object]
    digest: str
    key_id: str
    issued_at: str
    expires_at: str
    expired_at: str | None
    reproduce: str
    hub_pr_url: str
    download: str  # the path of the signed file
    revoked_at: NotRequired[str | None]  # since the transparency log; absent from older servers
    revocation_reason: NotRequired[str]


class Regression(TypedDict):
    id: int
    run: int
    previous_run: int
    metric: str
    previous: float
    current: float
    relative_change: float
    interval: list[float]  # empty for AL
    detectable_drop: float | None
    detected_at: str


class PairDetail(TypedDict):
    """GET /api/v1/pairs/<id>/."""

    id: int
    verifier: HubModel
    draft: HubModel | None  # None for ngram
    method: str
    num_speculative_tokens: int
    options: dict[str, object]
    created_at: str
    verdict: str
    speedup: float | None
    mean_acceptance_length: float | None
    hardware: str
    engine_version: str
    latest_run: Run | None
    regressed: bool
    compatibility: dict[str, object]
    format_metadata: dict[str, object]
    certificate: Certificate | None  # the public suite's; a workload's stays its owner's
    regressions: list[Regression]


class LogCheckpoint(TypedDict):
    """GET /api/v1/log/checkpoint: the latest signed checkpoint (C2SP tlog-checkpoint)."""

    origin: str
    size: int
    checkpoint: str


class PublicKey(TypedDict):
    """GET /api/v1/certificates/public-key/."""

    algorithm: str
    key_id: str
    issuer: str
    public_key_pem: str


# --- The gate's verdict on demand, and recommendations --------------------------------------------


class Finding(TypedDict):
    rule: str
    code: str  # gate:<rule>-<what>
    severity: str  # error, warning or info
    message: str
    hint: str


class GateReport(TypedDict):
    """POST /api/v1/compatibility/: kernel.formats.gate.Report.as_dict."""

    compatible: bool
    vllm_version: str
    method: str | None
    num_speculative_tokens: int
    findings: list[Finding]
    format: dict[str, object]
    recipe: dict[str, object] | None


class RecommendationQuery(TypedDict):
    verifier: str
    hardware: str
    concurrency: int
    workload: str


class Recommendation(TypedDict):
    pair: int
    draft: str  # the draft's repo id, or the method where there is none (ngram)
    method: str
    speedup: float
    indicative: bool  # a per-workload figure at c=1, with no interval
    verdict: str | None
    run: int
    mean_acceptance_length: float | None
    serve: str | None


class Recommendations(TypedDict):
    """GET /api/v1/recommendations/."""

    query: RecommendationQuery
    best: Recommendation | None  # the fastest certified one
    ranked: list[Recommendation]


# --- Your own traffic -----------------------------------------------------------------------------


class Workload(TypedDict):
    """POST /api/v1/workloads/ (a new upload, or the first of the same requests)."""

    id: int
    name: str
    verifier: str
    verifier_sha: str
    sha256: str
    format: str
    total_requests: int
    unique_requests: int
    sampled: int
    seed: int
    size_bytes: int
    categories: dict[str, object]
    measured: str  # '200 of your 10,000 requests, seed 0'
    created_at: str
    deleted_at: str | None


class AtConcurrency(TypedDict):
    concurrency: int
    speedup: float
    interval: list[float]
    supports: str
    dof: int


class BreakEven(TypedDict):
    faster_up_to: int | None
    slower_from: int | None


class PropertyRow(TypedDict):
    title: str
    outcome: str
    fault: str | None
    reason: str
    tone: str
    digest: str | None  # the engine qualification the judgement cites


class PublicSuite(TypedDict):
    run: int
    acceptance: dict[str, object] | None
    speed_c1: Speed | None


class Candidate(TypedDict):
    pair: int
    draft: str
    method: str
    run: int
    acceptance: dict[str, object] | None
    speed: list[Speed]
    break_even: BreakEven
    properties: list[PropertyRow]
    equivalent: bool  # no output difference found that is the pair's fault
    at_concurrency: AtConcurrency | None  # None where that level was not measured
    public_suite: PublicSuite | None
    serve: str | None


class WorkloadRecommendation(TypedDict):
    pair: int | None  # None: serve the verifier alone, or nothing measured at that level
    reason: str


class WorkloadExport(TypedDict):
    command: str


class WorkloadReport(TypedDict):
    """GET /api/v1/workloads/<id>/report/."""

    workload: Workload
    concurrency: int
    hardware: str | None  # None before any run on it finished
    measured_levels: list[int]
    candidates: list[Candidate]
    running: list[int]
    recommendation: WorkloadRecommendation | None  # None before any run on it finished
    export: WorkloadExport


# --- A deployment's observations ------------------------------------------------------------------


class Snapshot(TypedDict):
    """One counter snapshot as `spechub watch` pushes it (the request's SnapshotIn)."""

    read_at: float
    drafts: int
    draft_tokens: int
    accepted: int
    per_position: list[int]
    requests: int
    started_at: float | None
    engine_version: str | None
    k: int | None


class Ingested(TypedDict):
    """POST /api/v1/deployments/<id>/observations/: what SpecHub made of a push."""

    stored: int
    skipped: int  # already stored: a retried push
    state: str
    reason: str
    live_al: float | None


# --- A run of your own, judged (`spechub judge`) --------------------------------------------------


class JudgedPosition(TypedDict):
    position: int
    rate: float
    interval: list[float]
    certified: float | None
    certified_interval: list[float]
    verdict: str
    smallest_difference: float | None


class JudgeHeld(TypedDict):
    pair: int
    run: int
    engine_version: str
    hardware: str
    temperature: float
    temperature_from: NotRequired[str]  # "given", "the file" or "assumed"; absent from servers before issue 61


class Judgement(TypedDict):
    """POST /api/v1/judge/: a vllm bench serve result (or a saved /metrics) against its pair's certified band."""

    verdict: str  # within, below, above, too small, mismatch, no band
    reason: str
    al: float | None
    al_interval: list[float]
    certified_al: float | None
    band: list[float]
    smallest_difference: float | None
    drafts: int
    requests: int
    k: int | None
    source: str
    note: str
    positions: list[JudgedPosition]
    held: JudgeHeld
