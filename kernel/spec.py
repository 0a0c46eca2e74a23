"""The run specification handed to the director, and nothing Django."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import NotRequired, TypedDict, cast

from kernel.formats.recipe import Conditions


class Pinned(TypedDict):
    repo_id: str
    sha: str


class PlanFields(TypedDict):
    workloads: str
    concurrency: list[int] | tuple[int, ...]  # a tuple in memory, a list once stored as JSON
    repeats: int
    throughput_prompts: int
    output_tokens: int
    request_rate: float | None
    dtype: str
    seed: int
    enforce_eager: bool
    max_model_len: int
    sampling_temperature: float
    sampling_samples: int
    sampling_prefixes: int
    reference_check: bool
    thresholds: dict[str, float]
    smoke_engine_features: NotRequired[list[str] | tuple[str, ...] | None]  # absent from documents made before it
    acceptance_temperatures: NotRequired[list[float] | tuple[float, ...]]  # absent from documents made before it


class InputFields(TypedDict):
    """What a certification is of and how it measures: a RunSpec as JSON, less the run and attempt."""

    verifier: Pinned
    draft: Pinned | None
    method: str
    num_speculative_tokens: int
    engine: str
    hardware: str
    verifier_dtype: str
    draft_dtype: str
    options: dict[str, object]
    plan: PlanFields


class SpecFields(InputFields):
    """A RunSpec as JSON, as the result document carries it."""

    run_id: int
    attempt: int


def inputs_of(fields: SpecFields) -> InputFields:
    """Return what a spec pins, without the run and attempt it was made for (a certificate's inputs)."""
    inputs = {key: value for key, value in fields.items() if key not in ("run_id", "attempt")}
    return cast(InputFields, inputs)


@dataclass(frozen=True)
class ModelRef:
    """A Hub repo pinned to a commit."""

    repo_id: str
    sha: str


@dataclass(frozen=True)
class Thresholds:
    """What a certified pair must show; shown on the certificate."""

    greedy_exact_match: float = 1.0
    sampling_alpha: float = 0.001  # for all the sampling prefixes together (Bonferroni)
    # The least total variation over the binned outcomes the sampling test must be able to detect, with this power:
    # a test that could not reads "inconclusive", never "pass".
    sampling_tv: float = 0.1
    sampling_power: float = 0.99
    # A practical margin, not 1: a true 1.01x would otherwise be certified once its interval is narrow.
    min_speedup: float = 1.03


# The concurrency levels each hardware class measures by default. On the CPU class the benchmark
# client and both servers' front ends share the cores the engines leave them; past c=4 on 2 cores
# they, not the pair, set the pace (issue 24: intervals [0.96, 3.61] at c=8, [0.92, 5.59] at c=16).
CPU_LEVELS = (1, 2, 4)
GPU_LEVELS = (1, 2, 4, 8, 16, 32, 64)


# The most paired blocks a level takes by default. The cap costs precision, never coverage (Stein's rule is
# exact with it), so it is a budget: on the 2-core CPU class a block ratio's CV at c=1 was 12-19 % (issue 24's
# bench), where 12 pairs still left about ±20 % at 589 s a run, and 6 pairs ±15-25 % at 306-348 s.
CPU_MOST_PAIRS = 6
GPU_MOST_PAIRS = 12


def levels_for(hardware: str) -> tuple[int, ...]:
    """Return the default levels of a hardware class ("cpu", or a GPU class such as "gpu.h100")."""
    return CPU_LEVELS if hardware == "cpu" else GPU_LEVELS


def most_pairs_for(hardware: str) -> int:
    """Return the default cap on paired blocks per level of a hardware class."""
    return CPU_MOST_PAIRS if hardware == "cpu" else GPU_MOST_PAIRS


@dataclass(frozen=True)
class Plan:
    """How a run measures: which prompts, at which concurrency, how often, with which engine settings.

    Speed is measured against two servers in paired blocks, baseline/speculative pairs, each
    pair's order drawn at random, each request asking for `output_tokens` tokens. Each level times `repeats`
    pairs first; Stein's two-stage rule (workers/metrics.py) then fixes from their spread how
    many in all, at most `most_pairs`, for a 95 % interval of relative half-width `half_width`
    at the lowest level and `half_width_loaded` at the others. `request_rate` is the Poisson
    point's arrival rate (requests/s); None takes twice the rate the verifier alone served one
    request at a time, a loaded server.
    """

    workloads: str = "toy-v2"
    concurrency: tuple[int, ...] = GPU_LEVELS
    repeats: int = 4
    most_pairs: int = 12
    half_width: float = 0.05
    half_width_loaded: float = 0.10
    throughput_prompts: int = 32
    output_tokens: int = 128
    request_rate: float | None = None
    dtype: str = "float32"
    seed: int = 0
    enforce_eager: bool = True
    max_model_len: int = 512
    sampling_temperature: float = 1.0
    sampling_samples: int = 0  # per prefix; 0: what the thresholds' power asks for (workers/two_tokens.py)
    sampling_prefixes: int = 2
    reference_check: bool = True
    thresholds: Thresholds = field(default_factory=Thresholds)
    # The smoke tier's engine features to serve (workers/smoke.py names them); None: every one it knows.
    smoke_engine_features: tuple[str, ...] | None = None
    # Acceptance is measured greedy and, on the same prompts, sampled at each of these (top_p 1): users serve sampled.
    acceptance_temperatures: tuple[float, ...] = (0.7, 1.0)

    @property
    def conditions(self) -> Conditions:
        """The engine settings both servers and the published command carry."""
        return Conditions(dtype=self.dtype, max_model_len=self.max_model_len, enforce_eager=self.enforce_eager, seed=self.seed)


@dataclass(frozen=True)
class RunSpec:
    """Everything one certification needs; built by the registry, read by the director."""

    run_id: int
    attempt: int
    verifier: ModelRef
    draft: ModelRef | None
    method: str
    num_speculative_tokens: int
    engine: str
    hardware: str
    verifier_dtype: str = "auto"
    draft_dtype: str = "auto"
    options: dict[str, object] = field(default_factory=dict)
    plan: Plan = field(default_factory=lambda: Plan())

    def as_dict(self) -> SpecFields:
        fields: SpecFields = asdict(self)  # type: ignore[assignment]  # asdict is typed dict[str, Any]
        return fields


def spec_of(fields: InputFields, *, run_id: int, attempt: int) -> RunSpec:
    """Rebuild a RunSpec from its JSON (a certificate's inputs, or the spec the worker API hands a claim)."""
    plan, draft = fields["plan"], fields.get("draft")
    tuples = ("concurrency", "thresholds", "smoke_engine_features", "acceptance_temperatures")  # rebuilt below
    features = plan.get("smoke_engine_features")
    return RunSpec(
        run_id=run_id,
        attempt=attempt,
        verifier=ModelRef(**fields["verifier"]),
        draft=ModelRef(**draft) if draft else None,
        method=fields["method"],
        num_speculative_tokens=fields["num_speculative_tokens"],
        engine=fields["engine"],
        hardware=fields["hardware"],
        verifier_dtype=fields.get("verifier_dtype", "auto"),
        draft_dtype=fields.get("draft_dtype", "auto"),
        options=fields.get("options", {}),
        plan=Plan(
            # The other plan fields are stored as Plan holds them; mypy cannot match TypedDict items to keywords.
            **{key: value for key, value in plan.items() if key not in tuples},  # type: ignore[arg-type]
            concurrency=tuple(plan["concurrency"]),
            acceptance_temperatures=tuple(plan.get("acceptance_temperatures", ())),
            smoke_engine_features=tuple(features) if features is not None else None,
            thresholds=Thresholds(**plan["thresholds"]),
        ),
    )
