"""The result document's types (TypedDicts), its version, and the labels a measured figure may carry. Acceptance's
types are in acceptance_schema, the verdict's judged properties in property_schema."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from kernel.result.acceptance_schema import Acceptance, Counts
from kernel.result.figures import Amount, AtLeastOne, Count, Percentiles, Ratio, RatioInterval, Share
from kernel.result.property_schema import Divergence, Properties
from kernel.result.starts_schema import Start
from kernel.spec import SpecFields

SCHEMA_VERSION = 3
READABLE_VERSIONS = frozenset({1, 2, 3})


LATENCIES = ("ttft", "tpot", "itl", "e2e")  # time to first token, per output token, between tokens, end to end


PERCENTILES = (50, 90, 95, 99)


STAGE_ORDER = ("fetch", "gate", "baseline", "speculative", "equivalence", "throughput", "smoke", "verdict")


class Greedy(TypedDict):
    exact_match: Share | None
    prompts: Count
    divergences: list[Divergence]


class ChiSquare(TypedDict):
    samples: Count
    bins: Count
    statistic: Amount
    dof: Count
    p_value: Share


class Power(TypedDict):
    """What a test detects: any total variation ≥ tv over its bins, with this power, at this level."""

    tv: Share
    power: Share
    alpha: Share
    samples_needed: Count


class TwoTokenTest(ChiSquare):
    """The joint test of a prefix's first two tokens (workers/two_tokens.py), with the power it reached."""

    observed_tv: Share
    power: Power
    detectable_tv: Amount  # what the samples actually drawn detect with the stated power, over these bins
    # What the bins cover (issue 39; tests before it pooled everything else into one bin): the likeliest
    # outcomes one bin each, with their share of the verifier's probability, and the bins the rest is split into.
    own_outcomes: NotRequired[Count]
    own_mass: NotRequired[Share]
    bands: NotRequired[Count]


class SamplingTest(ChiSquare):
    """A pair's own test on one prefix of the suite. Documents before the joint test (2026-12-03) tested the
    second token given the modal first one, with no power stated: they carry given_first_token instead."""

    prefix: Count
    given_first_token: NotRequired[Count]
    observed_tv: NotRequired[Share]
    power: NotRequired[Power]
    detectable_tv: NotRequired[Amount]
    own_outcomes: NotRequired[Count]
    own_mass: NotRequired[Share]
    bands: NotRequired[Count]


class Rates(TypedDict):
    """One server at one level, over all its blocks."""

    tokens_per_second: Amount  # output tokens/s, the mean over blocks
    tokens_per_second_runs: list[Amount]  # each block's
    requests_per_second: Amount | None
    latency_ms: dict[str, Percentiles]  # LATENCIES -> {"p50", "p90", "p95", "p99"}, over all requests
    # Since issue 51: the engine's own percentiles of the same requests, from vLLM's histograms (stamped by its core),
    # and the LATENCIES whose client figures differ from them beyond the tolerance (workers/engine_latency.py): the
    # measuring machine's front end delayed those, and the engine's figure is the one to read. The registry works
    # `delayed` out again from the two sets of percentiles (kernel/result/agreement.py) rather than read the upload's.
    engine_latency_ms: NotRequired[dict[str, Percentiles]]
    delayed: NotRequired[list[str]]


class Stopping(TypedDict):
    """How many pairs a level took, and why it stopped there (Stein's two-stage rule, workers/metrics.py)."""

    first_pairs: Count  # timed before the rule looked
    most_pairs: Count
    target_half_width: Amount  # relative: 0.05 is ±5 %
    half_width: Amount  # what the interval has
    reason: str  # one of STOPPING_REASONS
    prompts: NotRequired[Count]  # units by prompt (metrics.PromptStein): the spread's dof are first_pairs - prompts


class Level(TypedDict):
    baseline: Rates
    speculative: Rates
    speedup: Ratio  # the geometric mean of the paired block ratios (from 5 on, less the highest and lowest: issue 51)
    speedup_interval: RatioInterval  # its 95 % interval (Student t on the log ratios; Stein's where `stopping` is)
    speedup_cv: Amount | None
    block_ratios: list[Ratio]  # speculative over baseline tok/s, one per A B (or B A) pair
    requests_per_block: Count
    stopping: NotRequired[Stopping]
    # The client's CPU seconds over wall time (1.0: a whole core), the median block's; and the concurrency
    # each side's requests achieved (the sum of their latencies over the block's wall time).
    client_busy: NotRequired[Amount]
    achieved_concurrency: NotRequired[dict[str, Amount]]
    # Since issue 51: why the measuring machine, not the pair, set this level's pace, from its timed blocks (the
    # verifier alone's blocks spread several times the pair's; the front end delayed whole requests). Such a level
    # counts in no verdict and no break-even.
    limited_by: NotRequired[str]


class RatePoint(Level):
    """Requests arriving as a Poisson process: `speedup` is baseline over speculative mean E2E latency."""

    request_rate: Ratio


class MachineLoad(TypedDict):
    """The machine around the timed blocks, so a reader can judge a noisy run."""

    load_average_before: list[Amount]
    load_average_after: list[Amount]
    wall_seconds: Amount
    other_cpu_seconds: float  # CPU time used by processes outside the measurement
    other_cpu_share: float  # of all cores over the wall time
    cpu_count: Count


class Servers(TypedDict):
    """The two servers: the commands that ran, and the `vllm serve` lines the pair page publishes."""

    baseline_command: list[str]
    speculative_command: list[str]
    baseline_recipe: str
    speculative_recipe: str
    start_seconds: Amount  # what the stage waited for them; less than their whole start when they started early
    output_tokens: Count
    started_early: NotRequired[bool]  # started after the gate, while the offline stages measured
    environment: NotRequired[dict[str, str]]  # what a user's server needs set too (CPU: KV cache, preloads); issue 62


class ServedCounters(TypedDict):
    """The pair server's /metrics counters on the greedy prompts, against the offline engine's or (`against`) its own answers'."""

    served: Counts
    offline: Counts
    agree: bool
    against: NotRequired[str]


class KSpeed(TypedDict):
    k: AtLeastOne
    mean_acceptance_length: float  # AL read at k from the run's counters (Acceptance.by_k)
    predicted_speedup: Amount  # from the step-cost model: a prediction, never a measurement


class BestK(TypedDict):
    """One concurrency level: every k's predicted speedup, the best, and the best measured as any speed figure."""

    baseline_step_seconds: Amount  # the verifier alone: one token per sequence per step, from its measured tok/s
    draft_seconds_per_token: Amount  # what the K run's steps cost beyond the verifier's own, per drafted token
    predicted: list[KSpeed]
    best_k: int
    measured: NotRequired[Level]  # paired blocks at best_k, where it is not the run's k (that one is `levels`)
    draft_seconds_per_step: NotRequired[Amount]  # the draft's fixed cost a step, where two measured k's fitted it
    fitted_from_k: NotRequired[list[int]]  # the two measured k's the draft's costs were fitted from


class ScheduleDrafting(TypedDict):
    honoured: bool  # the level's drafting follows the schedule (workers/served_schedule.py)
    drafted_per_step: Amount
    drafting: str  # what it drafted, against what the schedule says


class ScheduleLevel(Level, ScheduleDrafting):
    """One level timed on the schedule's server against the same baseline, with what it drafted."""


class ServedSchedule(TypedDict):
    """The Dynamic SD schedule composed from each level's best k (k = 0 where slower), served and timed."""

    ranges: list[list[int]]  # [start, end, k]: inclusive batch-size ranges
    levels: dict[str, ScheduleLevel]
    honoured: bool
    finding: str | None  # "schedule not honoured: ..." for the engine build
    recipe: str  # the `vllm serve` line with the schedule
    serve_it: bool  # faster than the fixed k at some level and slower at none: the command the pair page gives
    why: str  # why it is, or is not, the command to serve


class ChoiceOfK(TypedDict):
    """Which k (workers/choice_of_k.py): predicted per level from the step costs measured on the pair, the best
    measured; `recipes` holds a `vllm serve` line for every k that was measured."""

    run_k: AtLeastOne
    verifier_seconds_per_token: Amount  # the slope of time to first token over prompt length on the baseline server
    prefill: dict[str, list[float]]  # {"tokens": [...], "seconds": [...]}: the medians the slope was fitted to
    levels: dict[str, BestK]
    recipes: dict[str, str]  # str(k) -> `vllm serve` line
    schedule: NotRequired[ServedSchedule]  # absent where one k is best everywhere, or before it was measured


class Throughput(TypedDict):
    levels: dict[str, Level]
    choice_of_k: NotRequired[ChoiceOfK]
    # The crossing of point estimates, with no interval: documents before 2026-12-03 carry it; nothing reads it.
    break_even_concurrency: NotRequired[float | None]
    theoretical_bound: float | None
    per_category_speedup: dict[str, Amount]
    mode: str  # "serving"; "offline" for version-2 documents
    servers: Servers | None
    rate_point: RatePoint | None
    load: MachineLoad | None
    counters: ServedCounters | None


class SmokeFeature(TypedDict):
    """One serving feature with speculation: equal, differs, runs, fails, not-supported, speculation off, parameter
    ignored, constraint broken or not judged (workers/smoke.py)."""

    feature: str
    outcome: str
    detail: str
    divergence: NotRequired[dict[str, int]]  # the first diverging request and token
    error: NotRequired[str]  # the engine's own message
    refused_at_start: NotRequired[bool]  # the verifier alone exited at its start with it: the build's, kept for later runs


class Smoke(TypedDict):
    features: list[SmokeFeature]
    seconds: Amount


class Equivalence(TypedDict):
    greedy: dict[str, Greedy]
    reference: dict[str, Greedy] | None
    sampling: list[SamplingTest]


class WorkloadEquivalence(TypedDict, total=False):
    greedy_exact_match: Share | None
    divergences: list[Divergence]
    reference_exact_match: Share | None


class WorkloadThroughput(TypedDict, total=False):
    speedup: Amount | None


class WorkloadFigures(TypedDict):
    acceptance: Acceptance
    equivalence: WorkloadEquivalence
    throughput: WorkloadThroughput


class Suite(TypedDict):
    suite: str
    sha256: str
    prompts: NotRequired[Count]  # the distinct prompts measured; never the prompts themselves
    private: NotRequired[bool]  # a user's own workload


class Environment(TypedDict, total=False):
    versions: dict[str, str]
    engine_build: str
    hardware_class: str
    cpu: str  # the CPU's model name since issue 51 (before: the platform's word, such as x86_64)
    cpu_extensions: list[str]  # its vector extensions that decide the engine's CPU kernels (workers/host.py)
    cpu_capability: str | None  # the level torch dispatched its CPU kernels at ("AVX512", "AVX2")
    model_runner: str  # vLLM's model runner ("V1"; "V2", Model Runner V2, where the build chose it); "" if unknown
    cpu_count: int | None
    engine: dict[str, object]  # the engine's own manifest: its arguments, as the engine reports them
    baseline_engine: dict[str, object]
    dtype: str
    enforce_eager: bool
    k: int
    seed: int
    workloads: Suite
    speculative_config: dict[str, object] | None
    quantization: dict[str, object]  # kernel.quantized.Derivation: which checkpoints are quantized, from what (issue 53)
    preload: dict[str, str | None]  # CPU: each library vLLM's processes preloaded, None where absent (workers/preload.py)


class Verdict(TypedDict):
    verdict: str
    reasons: list[str]
    thresholds: dict[str, float]
    workloads: dict[str, WorkloadFigures]
    environment: Environment
    # Since per-property verdicts (kernel/verdict.py); absent from older documents.
    properties: NotRequired[Properties]
    qualification: NotRequired[dict[str, str] | None]  # the engine qualification it was judged with
    starts: NotRequired[list[Start]]  # every engine and server the run started, in order; absent before issue 62


class BaselineCache(TypedDict):
    key: str
    hit: bool


class BaselineStage(TypedDict):
    cache: BaselineCache
    start_seconds: Amount
    manifest: dict[str, object]


class SpeculativeStage(TypedDict):
    start_seconds: Amount
    manifest: dict[str, object]
    acceptance: Acceptance


class Stages(TypedDict, total=False):
    """Each stage's part; a director given fewer stages (tests, partial runs) leaves the rest out."""

    fetch: dict[str, str | None]  # the pinned commits fetched
    gate: dict[str, object]  # the gate's report, as kernel.formats.Report.as_dict gives it
    baseline: BaselineStage
    speculative: SpeculativeStage
    equivalence: Equivalence
    throughput: Throughput
    smoke: Smoke  # since the smoke tier; absent from older documents
    verdict: Verdict


class ResultDocument(TypedDict):
    schema_version: int
    spec: SpecFields
    stages: Stages
    workloads: dict[str, WorkloadFigures]
    environment: Environment


class Summary(TypedDict):
    """The headline figures of one document, as listings, regressions and the catalog use them."""

    verdict: str | None
    mean_acceptance_length: float | None
    speedup: dict[str, float]
    per_category_speedup: dict[str, float]
    faster_up_to: int | None  # break_even_bounds: the fixed sequence upward from c=1
    slower_from: int | None
    engine_build: str
    serve: str | None  # the `vllm serve` line a reader is told to run (rows.serve_command)


class CertifiedAcceptance(TypedDict):
    acceptance: Acceptance | None


class CertifiedEquivalence(TypedDict):
    greedy: dict[str, Greedy] | None
    reference: dict[str, Greedy] | None
    sampling: list[SamplingTest] | None


class CertifiedResults(TypedDict):
    """The part of a document a certificate carries; the raw sweeps stay with the run."""

    workloads: dict[str, WorkloadFigures]
    speculative: CertifiedAcceptance
    equivalence: CertifiedEquivalence
    throughput: Throughput | None


FASTER, SLOWER, NO_DIFFERENCE = "faster", "slower", "no measurable difference"
BELOW_MARGIN = "faster, but not by the margin"
# Its interval lies under 1, but not wholly under 1 / margin: "slower" needs the same margin "faster" does (issue 63
# §1: against 1, a pair truly 2 % slower read "slower" at c=1 in 15 % of runs at CV 3 %).
SLOWER_BELOW_MARGIN = "slower, but not by the margin"
# A level where the measuring machine (the benchmark client, or requests short of the concurrency asked), not the
# pair, set the pace: shown, never in a verdict or a break-even.
MACHINE_LIMITED = "limited by the measuring machine"
# Its own interval excludes 1, but a level before it in the fixed sequence did not show the same (in_sequence).
NOT_IN_SEQUENCE = "not claimed faster: 'faster' is claimed upward from the lowest level, and a lower level was not faster"
# Its own interval lies under 1 / margin, but not under the share of the error rate the levels' family leaves it:
# "slower" holds 2.5 % for all levels together, the lowest level (the verdict's) on half of it and the others downward
# from the highest on the other half, each half passed on where it is spent (result.slower_claims).
NOT_IN_SEQUENCE_SLOWER = (
    "not claimed slower: 'slower' holds its 2.5 % error for all levels together (the lowest level on half of it, the "
    "others downward from the highest on the other half), and this level's interval did not clear its share"
)
# Which limit ended a level: the precision; the most pairs, short of it; Stein's count, short of it where later pairs
# spread more (the interval takes the larger spread). The last: older documents, whatever limit ended the level.
REACHED, NOT_REACHED = "precision reached", "the most pairs reached, precision not"
SPREAD_LATER = "Stein's count reached, precision not: later pairs spread more"
NOT_REACHED_BEFORE = "precision not reached at the most pairs"


STOPPING_REASONS = (REACHED, NOT_REACHED, SPREAD_LATER, MACHINE_LIMITED, NOT_REACHED_BEFORE)
