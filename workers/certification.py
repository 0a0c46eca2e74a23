"""The measuring stages: fetch → gate → baseline → speculative → equivalence → throughput → smoke → verdict.

Stages share one Workbench per run (workers/workbench.py: snapshots, the gate's engine config, the tokenized
suite, raw measurements). Outputs and counters come from the two published servers the gate starts, which the
throughput stage then times side by side (workers/served.py, workers/speed.py); where those start later (one GPU)
or not at all (no throughput stage), from offline engines loaded one after another.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import cast

from kernel import quantized, result
from kernel.builds import engine_build, installed_versions
from kernel.errors import UserError
from kernel.formats import ReportDict
from kernel.hub import HubClient
from kernel.repos import LocalRepo, gate_check
from kernel.traffic.templates import switches
from kernel.verdict import judge_document
from workers import audit, baselines, host, metrics, modes, preload, served, speed, two_tokens
from workers import smoke as smoke_tier
from workers.engines import load_engine
from workers.engines.base import Engine, Sampling, SpecCounters
from workers.suites import chat_template, tokenize
from workers.workbench import (
    Counted,
    Measured,
    Outputs,
    RawCounters,
    Tick,
    Workbench,
    as_counters,
    counters_of,
    measured,
    total_counters,
    without_local_paths,
)


def fetch(bench: Workbench, report: Tick) -> dict[str, str | None]:
    """Download the pinned snapshots (safetensors and JSON only), and take the suite's prompts as token ids.

    The prompts are rendered here, once the verifier's chat template is at hand, and only for a user's file given
    to the CLI: a registry workload arrives rendered."""
    client, spec = HubClient.from_settings(), bench.spec
    bench.paths["verifier"] = client.snapshot(spec.verifier.repo_id, spec.verifier.sha)
    report(50)
    if spec.draft:
        bench.paths["draft"] = client.snapshot(spec.draft.repo_id, spec.draft.sha)
    bench.suite = bench.suite.rendered(bench.paths["verifier"], spec.plan.max_model_len)
    bench.template = chat_template(bench.paths["verifier"])
    bench.switches = switches(bench.template)
    bench.categories = [category for category, _ in bench.suite.prompts()]
    bench.prompts = tokenize(bench.paths["verifier"], [prompt for _, prompt in bench.suite.prompts()])
    return {"verifier": spec.verifier.sha, "draft": spec.draft.sha if spec.draft else None}


def gate(bench: Workbench, report: Tick) -> ReportDict:
    """Judge the downloaded snapshots; the engine is configured from the gate's own recipe."""
    spec = bench.spec
    draft = _snapshot_repo(bench.paths["draft"], spec.draft.repo_id, spec.draft.sha) if spec.draft else None
    judged = gate_check(
        verifier=_snapshot_repo(bench.paths["verifier"], spec.verifier.repo_id, spec.verifier.sha),
        verifier_id=spec.verifier.repo_id,
        draft=draft,
        method=spec.method,
        k=spec.num_speculative_tokens,
        options=spec.options,
    )
    if not judged.compatible or judged.recipe is None:
        raise UserError("gate:incompatible", "; ".join(f"{f.code}: {f.message}" for f in judged.errors))
    bench.gate = judged
    config = dict(judged.recipe.speculative_config)
    if "model" in config:  # served from the pinned snapshot, which is that revision
        config.pop("revision", None)
        config["model"] = str(bench.paths["draft"])
    bench.engine_config = config
    speed.start_early(bench)
    return judged.as_dict()


def _snapshot_repo(snapshot: Path, repo_id: str, sha: str) -> LocalRepo:
    """A downloaded snapshot: its files are links into the cached repo's blobs/ folder."""
    return LocalRepo(snapshot, repo_id, sha, boundary=snapshot.parents[1])


def measure(bench: Workbench, speculative: bool, report: Tick) -> Measured:
    """Run greedy per category and (speculative) the sampling probes, temperatures and modes: on the run's published
    server where it is up (workers/served.py), else on an offline engine loaded for it and unloaded after."""
    engine = served.on_server(bench, speculative) or load_engine(bench.spec.engine)()
    started = time.perf_counter()
    engine.start(bench.config(speculative))
    loaded = time.perf_counter() - started
    try:
        report(30)
        greedy, counters, per_prompt = _counted(engine, bench, _greedy(bench), apart=bench.early is not None)
        report(60)
        samples = _sampling(engine, bench) if speculative else {}
        sampled = _temperatures(engine, bench) if speculative else {}
        started_modes = time.perf_counter()
        by_mode = _modes(engine, bench) if speculative else {}
        modes_seconds = time.perf_counter() - started_modes
        manifest = without_local_paths(engine.manifest(), bench)
    finally:
        engine.stop()
    return {
        "start_seconds": loaded,
        "greedy": greedy,
        "counters": counters,
        "per_prompt": per_prompt,
        "samples": samples,
        "manifest": manifest,
        "by_temperature": sampled,
        "by_mode": by_mode,
        "by_mode_seconds": round(modes_seconds, 1),
    }


def _greedy(bench: Workbench) -> Sampling:
    return Sampling(temperature=0, max_tokens=bench.suite.max_tokens)


def _temperatures(engine: Engine, bench: Workbench) -> dict[str, Counted]:
    """The same prompts sampled at each of the plan's temperatures (top_p 1), for acceptance as users serve it:
    counters only, the outputs are not compared."""
    found: dict[str, Counted] = {}
    for temperature in bench.spec.plan.acceptance_temperatures:
        sampling = Sampling(temperature=temperature, max_tokens=bench.suite.max_tokens, seed=bench.spec.plan.seed)
        _, counters, per_prompt = _counted(engine, bench, sampling)
        found[str(temperature)] = {"counters": counters, "per_prompt": per_prompt}
    return found


def _modes(engine: Engine, bench: Workbench) -> dict[str, Counted]:
    """Greedy counters with the template's thinking switch on and off, on the engine already loaded (issue 53)."""

    def count(batches: dict[str, list[list[int]]]) -> Counted:
        _, counters, per_prompt = _counted(engine, bench, _greedy(bench), batches)
        return {"counters": counters, "per_prompt": per_prompt}

    return modes.measured(bench, count)


def _counted(
    engine: Engine,
    bench: Workbench,
    sampling: Sampling,
    batches: dict[str, list[list[int]]] | None = None,
    *,
    apart: bool = False,
) -> tuple[Outputs, dict[str, RawCounters], dict[str, list[RawCounters]]]:
    """Outputs and counter deltas, one generate call per category (the same batching in both engines), or one per
    prompt (`apart`: no batch to change the arithmetic), and each prompt's own counters where every request of the
    category has them; the run's prompts unless `batches` names others."""
    outputs: Outputs = {}
    counters: dict[str, RawCounters] = {}
    per_prompt: dict[str, list[RawCounters]] = {}
    for category, prompts in (bench.by_category() if batches is None else batches).items():
        before = engine.counters()
        calls = [[prompt] for prompt in prompts] if apart else [prompts]
        completions = [done for call in calls for done in engine.generate(call, sampling)]
        outputs[category] = [list(c.token_ids) for c in completions]
        counters[category] = _raw(engine.counters() - before)
        own = [c.counters for c in completions if c.counters is not None]
        if own and len(own) == len(completions):
            per_prompt[category] = [_raw(c) for c in own]
    return outputs, counters, per_prompt


def sampling_prefixes(bench: Workbench) -> list[list[int]]:
    """The prompts the sampling test probes: one per category, in suite order, up to the plan's count."""
    firsts: dict[str, list[int]] = {}
    for prompt, category in zip(bench.prompts, bench.categories, strict=True):
        firsts.setdefault(category, prompt)
    return list(firsts.values())[: bench.spec.plan.sampling_prefixes]


def _raw(counters: SpecCounters) -> RawCounters:
    return {
        "drafts": counters.drafts,
        "draft_tokens": counters.draft_tokens,
        "accepted": counters.accepted,
        "per_position": list(counters.per_position),
    }


def _sampling(engine: Engine, bench: Workbench) -> Outputs:
    """Two-token samples per prefix: the second token is the first one speculation decides."""
    plan = bench.spec.plan
    n = plan.sampling_samples or sampling_power(bench)["samples_needed"]
    sampling = Sampling(temperature=plan.sampling_temperature, max_tokens=2, seed=plan.seed, n=n)
    return {
        str(index): [list(c.token_ids) for c in engine.generate([prefix], sampling)]
        for index, prefix in enumerate(sampling_prefixes(bench))
    }


def baseline(bench: Workbench, report: Tick) -> result.BaselineStage:
    """The verifier alone, offline: greedy outputs, kept per (verifier, engine build, hardware, suite, conditions).

    Only outputs are kept: timings are never reused, the throughput stage times both sides afresh.
    A user's private workload is never cached: its outputs live only as long as the run.
    """
    key = baselines.key(bench.spec, bench.suite.sha256, served=bench.early is not None)
    cached = None if bench.suite.private else cast(Measured | None, baselines.load(key))
    hit = cached is not None
    if cached is None:
        cached = measure(bench, speculative=False, report=report)
        if not bench.suite.private:
            baselines.store(key, cached)
    bench.baseline = cached
    return {"cache": {"key": key, "hit": hit}, "start_seconds": cached["start_seconds"], "manifest": cached["manifest"]}


def speculative(bench: Workbench, report: Tick) -> result.SpeculativeStage:
    bench.speculative = measure(bench, speculative=True, report=report)
    prompts = _prompts_of(bench.speculative)
    acceptance = metrics.acceptance(total_counters(bench.speculative), prompts)
    if prompts is not None:
        # Kept so that a quantized pair's run pairs with its unquantized pair's, prompt by prompt (issue 53 §2).
        acceptance["per_prompt"] = {"drafts": [p.drafts for p in prompts], "accepted": [p.accepted for p in prompts]}
        edges = metrics.length_buckets(bench.spec.plan.max_model_len, bench.suite.max_tokens)
        lengths = [len(prompt) for batch in bench.by_category().values() for prompt in batch]
        acceptance["by_length"] = metrics.by_length(lengths, prompts, edges)
    sampled = {float(t): (total_counters(c), _prompts_of(c)) for t, c in bench.speculative.get("by_temperature", {}).items()}
    if sampled:
        acceptance["by_temperature"] = metrics.by_temperature({0.0: (total_counters(bench.speculative), prompts), **sampled})
    acceptance["mode"] = modes.figures_mode(bench.suite.asked())
    by_mode = {mode: (total_counters(c), _prompts_of(c)) for mode, c in bench.speculative.get("by_mode", {}).items()}
    if by_mode and bench.switches.measured:
        found = modes.by_mode(bench.switches.measured, modes.prompts_as(bench.suite.asked()), by_mode)
        acceptance["by_mode"] = {**found, "seconds": bench.speculative.get("by_mode_seconds", 0.0)}
    return {"start_seconds": bench.speculative["start_seconds"], "manifest": bench.speculative["manifest"],
            "acceptance": acceptance}  # fmt: skip


def _prompts_of(measured: Counted, *categories: str) -> list[SpecCounters] | None:
    """Each prompt's own counters in `categories` (all by default), or None unless every category has them."""
    own = measured.get("per_prompt", {})
    wanted = categories or tuple(measured["counters"])
    if not all(category in own for category in wanted):
        return None
    return [as_counters(raw) for category in wanted for raw in own[category]]


def equivalence(bench: Workbench, report: Tick) -> result.Equivalence:
    """Greedy: speculative against the verifier alone on the same build, and against the reference engine.
    Sampling: the speculated token's frequencies against the verifier's exact distribution."""
    base, spec = (m["greedy"] for m in measured(bench))
    per_category = {c: metrics.greedy_equivalence(base[c], spec[c]) for c in base}
    reference = _reference_greedy(bench) if bench.spec.plan.reference_check else None
    report(50)
    sampling = _sampling_tests(bench)
    return {"greedy": per_category, "reference": reference, "sampling": sampling}


def _reference_greedy(bench: Workbench) -> dict[str, result.Greedy]:
    """The reference engine's verifier-only greedy outputs against vLLM's baseline, per category."""
    engine = load_engine("reference")()
    engine.start(bench.config(speculative=False))
    try:
        found, _, _ = _counted(engine, bench, _greedy(bench))
    finally:
        engine.stop()
    base = measured(bench)[0]["greedy"]
    return {c: metrics.greedy_equivalence(found[c], base[c]) for c in found}


def sampling_power(bench: Workbench) -> result.Power:
    """What each prefix's test must detect; the level is split over the prefixes (Bonferroni). Sized for the most
    bins (the exact distribution is read after sampling), so it never asks for fewer samples than the test needs."""
    thresholds = bench.spec.plan.thresholds
    level = thresholds.sampling_alpha / max(1, len(sampling_prefixes(bench)))
    return two_tokens.power_plan(thresholds.sampling_tv, level, thresholds.sampling_power)


def _sampling_tests(bench: Workbench) -> list[result.SamplingTest]:
    """The joint two-token test per prefix, against the verifier's exact distribution."""
    prefixes, plan = sampling_prefixes(bench), bench.spec.plan
    if not prefixes:
        return []
    samples = measured(bench)[1]["samples"]
    joints = two_tokens.distributions(Path(bench.paths["verifier"]), prefixes, plan.sampling_temperature, plan.dtype)
    power = sampling_power(bench)
    tests = [two_tokens.test(two_tokens.pairs(samples.get(str(i), [])), joint, power) for i, joint in enumerate(joints)]
    return [cast(result.SamplingTest, {"prefix": index, **test}) for index, test in enumerate(tests)]


def smoke(bench: Workbench, report: Tick) -> result.Smoke:
    """The serving-feature smoke tier: the request features the throughput stage ran, then the engine features."""
    engine = load_engine(bench.spec.engine)()
    configs = speed.configs(bench)
    features, spawned, bench.smoke_early = bench.spec.plan.smoke_engine_features, bench.smoke_early, None
    known = bench.smoke_known if bench.smoke_known is not None else smoke_tier.refused_before(bench.spec, features)
    grid = smoke_tier.tier(engine, configs, configs["baseline"].verifier, bench.prompts, bench.smoke_requests, features,
                           spawned, known)  # fmt: skip
    smoke_tier.remember_refusals(bench.spec, grid["features"], known)
    return {**grid, "seconds": round(grid["seconds"] + bench.smoke_request_seconds, 1)}


def verdict(bench: Workbench, report: Tick) -> result.Verdict:
    """The verdict stage: judge each property the earlier stages measured (kernel/verdict.py).

    A worker holds no engine qualification: a sampling rejection reads "not judgeable" until
    the registry (or `certify --qualification`) judges the document again with one.
    """
    thresholds = bench.spec.plan.thresholds
    draft = bench.spec.draft.repo_id if bench.spec.draft else bench.spec.method
    audit.record("certification", f"{draft} stages={','.join(bench.stages)}")
    level, reasons, properties = judge_document(bench.stages, method=bench.spec.method, thresholds=thresholds,
                                                qualification=None, spec=bench.spec.as_dict())  # fmt: skip
    return {
        "verdict": level,
        "reasons": reasons,
        "thresholds": asdict(thresholds),
        "workloads": _workloads(bench),
        "environment": environment(bench),
        "properties": properties,
        "qualification": None,
        "starts": [start.as_record() for start in bench.starts],
    }


def environment(bench: Workbench) -> result.Environment:
    """Everything the figures depend on: library versions, the engine build, hardware, and the exact engine arguments."""
    versions = installed_versions()
    plan = bench.spec.plan
    base, spec = measured(bench)
    return {
        "versions": versions,
        "engine_build": engine_build(bench.spec.engine, versions),
        "hardware_class": bench.spec.hardware,
        "cpu": host.cpu_model(),
        "cpu_extensions": host.vector_extensions(),
        "cpu_capability": host.torch_capability(),
        "model_runner": str(spec["manifest"].get("model_runner") or ""),
        "cpu_count": os.cpu_count(),
        "engine": spec["manifest"],
        "baseline_engine": base["manifest"],
        "dtype": plan.dtype,
        "enforce_eager": plan.enforce_eager,
        "k": bench.spec.num_speculative_tokens,
        "seed": plan.seed,
        "workloads": {
            "suite": bench.suite.label,
            "sha256": bench.suite.sha256,
            "prompts": len(bench.prompts),
            "private": bench.suite.private,
        },
        "speculative_config": without_local_paths(bench.engine_config, bench),
        "quantization": _quantization(bench),
        **({"preload": preload.described()} if bench.spec.hardware == "cpu" else {}),
    }


def _quantization(bench: Workbench) -> dict[str, object]:
    """Which of the pair's checkpoints are quantized, and the base each names (kernel.quantized.derivation)."""
    configs = {role: _config(bench.paths.get(role)) for role in ("draft", "verifier")}
    return dict(quantized.derivation(configs["draft"], configs["verifier"]))


def _config(folder: Path | None) -> object:
    try:
        return json.loads((folder / "config.json").read_text()) if folder is not None else None
    except (OSError, ValueError):  # the gate already judged the config: what it could not read names no scheme here
        return None


def _workloads(bench: Workbench) -> dict[str, result.WorkloadFigures]:
    greedy = bench.stages["equivalence"]["greedy"]
    served = bench.stages.get("throughput")  # a stage list without serving leaves speed unmeasured, not broken
    speedups = served["per_category_speedup"] if served else {}
    reference = bench.stages["equivalence"]["reference"] or {}
    drafted = measured(bench)[1]
    return {
        category: {
            "acceptance": metrics.acceptance(counters_of(drafted, category), _prompts_of(drafted, category)),
            "equivalence": {
                "greedy_exact_match": greedy[category]["exact_match"],
                "divergences": greedy[category]["divergences"],
                "reference_exact_match": reference[category]["exact_match"] if category in reference else None,
            },
            "throughput": {"speedup": speedups.get(category)},
        }
        for category in greedy
    }
