"""The throughput stage: the verifier alone and the pair served side by side (workers/serving.py), their served
counters checked against their answers' own (or the offline engine's), and every level timed in paired blocks to the
plan's precision (workers/timing.py), then the Poisson rate point.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Mapping

from kernel import result, schedule
from kernel.builds import installed_engine_build
from kernel.errors import InfraError, UserError
from kernel.formats import serve_arguments, serve_line
from kernel.schedule import Range
from kernel.spec import Plan
from workers import choice_of_k as choosing
from workers import metrics, serving, timing
from workers import served_schedule as scheduled
from workers import smoke as smoke_tier
from workers.engines import load_engine
from workers.engines.base import Engine, EngineConfig, SpecCounters
from workers.workbench import Tick, Workbench, as_counters, measured, total_counters, without_local_paths

# A block's interval is conditional on its prompts: one per category left a workload without categories two.
MIN_BLOCK_PROMPTS = 8


def sweep_order(bench: Workbench) -> list[int]:
    """The prompts speed is timed on: drawn at random within each category (the plan's seed, recorded with the run),
    then round-robin over the categories, so each block mixes them."""
    by_category: dict[str, list[int]] = {}
    for index, category in enumerate(bench.categories):
        by_category.setdefault(category, []).append(index)
    draw = random.Random(bench.spec.plan.seed)  # noqa: S311  # a reproducible sample, not a secret
    for indices in by_category.values():
        draw.shuffle(indices)
    rounds = itertools.zip_longest(*by_category.values())
    return [i for row in rounds for i in row if i is not None][: bench.spec.plan.throughput_prompts]


def level_prompts(bench: Workbench, concurrency: int) -> list[int]:
    """The prompts a level's blocks carry: enough to keep `concurrency` busy twice over, every category, and 8."""
    order = sweep_order(bench)
    return order[: max(2 * concurrency, len(set(bench.categories)), MIN_BLOCK_PROMPTS)]


def configs(bench: Workbench) -> dict[str, EngineConfig]:
    """The two servers speed is measured on: the verifier alone, and with the pair's draft."""
    return {"baseline": bench.config(speculative=False), "speculative": bench.config(speculative=True)}


def start_early(bench: Workbench) -> None:
    """Start the throughput stage's servers now, once the gate has configured the engine: the offline stages then
    measure on them (workers/served.py), and the throughput stage times the same two."""
    engine = load_engine(bench.spec.engine)()
    if bench.serves and bench.early is None and engine.serves_beside_offline():  # on one GPU, after the offline stages
        bench.early = serving.spawn(engine, configs(bench))


def throughput(bench: Workbench, report: Tick) -> result.Throughput:
    """Serve the verifier alone and the pair side by side, check the served counters, time paired blocks."""
    plan = bench.spec.plan
    if not 2 <= plan.repeats <= plan.most_pairs:
        raise UserError("run:invalid-spec", f"repeats is {plan.repeats} and most_pairs {plan.most_pairs}: an interval needs "
                        "2 paired blocks at least, and the first stage no more than the most.")  # fmt: skip
    early, bench.early = bench.early, None
    started = time.perf_counter()
    engine = load_engine(bench.spec.engine)()
    with serving.servers(engine, configs(bench), early) as running:
        waited = time.perf_counter() - started
        report(30)
        model = bench.config(speculative=False).verifier
        counters = served_counters_check(bench, running["speculative"], model, served_figures=early is not None)
        for server in running.values():  # the first requests pay for lazy set-up: keep them out of the timings
            timing.run_block(server, model, bench.prompts[:4], 16, concurrency=4)
        report(40)
        with timing.LoadMeter() as load:
            levels, per_category, rate_point = _timed(bench, running, model, report)
        if engine.serves_beside_offline():  # which k is the last timed work: the smoke tier's servers may load after it
            choice = which_k(bench, running, model, levels)
            _smoke_requests(bench, engine, running, model)
        else:  # one GPU: which k stops the published pair's speculative server to start its own
            _smoke_requests(bench, engine, running, model)
            choice = which_k(bench, running, model, levels)
    al = metrics.acceptance(total_counters(measured(bench)[1]))["mean_acceptance_length"]
    figures: result.Throughput = {
        "levels": levels,
        # With a free draft, each verifier step yields AL tokens: no speedup can exceed it.
        "theoretical_bound": al,
        "per_category_speedup": per_category,
        "mode": "serving",
        "servers": {
            **served_commands(bench, running, waited),
            "started_early": early is not None,
            "environment": engine.published_environment(bench.config(speculative=True)),
        },
        "rate_point": rate_point,
        "load": load.record(),
        "counters": counters,
    }
    if choice is not None:
        figures["choice_of_k"] = choice
    return figures


def _smoke_requests(bench: Workbench, engine: Engine, running: dict[str, serving.Server], model: str) -> None:
    """The smoke tier's request features on the published servers; on CPU its engine-feature servers load meanwhile,
    but for the flags the build refused on an earlier run."""
    plan, began = bench.spec.plan, time.perf_counter()
    bench.smoke_known = smoke_tier.refused_before(bench.spec, plan.smoke_engine_features)
    serve = [name for name in smoke_tier.chosen(plan.smoke_engine_features) if name not in bench.smoke_known]
    bench.smoke_early = smoke_tier.start_engine_features(engine, configs(bench), serve)
    bench.smoke_requests = smoke_tier.request_features(running, model, bench.prompts, plan.max_model_len,
                                                       engine.speculation_switches())  # fmt: skip
    bench.smoke_request_seconds = time.perf_counter() - began


def _timed(
    bench: Workbench, running: dict[str, serving.Server], model: str, report: Tick
) -> tuple[dict[str, result.Level], dict[str, float], result.RatePoint]:
    """Every level's paired blocks, then the Poisson point at a rate the baseline's c=1 blocks set."""
    plan = bench.spec.plan
    levels: dict[str, result.Level] = {}
    per_category: dict[str, float] = {}
    for number, concurrency in enumerate(plan.concurrency):
        levels[str(concurrency)], blocks = _level(bench, running, model, concurrency)
        if concurrency == 1:
            per_category = timing.category_speedups(blocks, [bench.categories[i] for i in level_prompts(bench, concurrency)])
        report(40 + 50 * (number + 1) // len(plan.concurrency))
    return levels, per_category, _rate_point(bench, running, model, levels, [bench.prompts[i] for i in sweep_order(bench)[:8]])


def _level(
    bench: Workbench, pair: Mapping[str, serving.Server], model: str, concurrency: int
) -> tuple[result.Level, dict[str, list[timing.Block]]]:
    """One level's paired blocks, to the plan's precision: the same prompts on both servers, `concurrency` at once.

    A block is a count of requests: request quadruples at c=1 and blocks timed to 4 s above it were measured beside
    this on the CPU class, and neither narrowed the interval for the time (docs/measuring.md, issue 38).
    """
    plan = bench.spec.plan
    prompts = [bench.prompts[i] for i in level_prompts(bench, concurrency)]

    def block(server: serving.Server, repeat: int) -> timing.Block:
        return timing.run_block(server, model, prompts, plan.output_tokens, concurrency=concurrency)

    rule = stopping_rule(plan, lowest=concurrency == plan.concurrency[0])
    return timing.precise_level(pair, rule, block, timing.throughput_ratio, asked=concurrency)


def which_k(
    bench: Workbench, running: dict[str, serving.Server], model: str, levels: dict[str, result.Level]
) -> result.ChoiceOfK | None:
    """Predict every k's speedup up to the run's from the step costs (workers/choice_of_k.py), then measure each
    level's best k where it is not the run's: one more speculative server per such k, beside the same baseline."""
    by_k = metrics.acceptance(total_counters(measured(bench)[1])).get("by_k")
    if not by_k:
        return None
    plan, run_k = bench.spec.plan, bench.spec.num_speculative_tokens
    vocabulary = sorted({token for prompt in bench.prompts for token in prompt})
    time.sleep(timing.QUIET_BEFORE_BLOCK)
    prefill = choosing.prefill(running["baseline"], model, vocabulary, plan.max_model_len, plan.seed)
    per_token = choosing.slope(prefill)
    chosen = choosing.choose(levels, by_k, per_token)
    recipes = {str(run_k): recipe(bench, run_k)}
    engine = load_engine(bench.spec.engine)()
    for k, at in choosing.to_measure(chosen, run_k).items():
        name = f"speculative-k{k}"
        if not engine.serves_beside_offline():  # three servers do not fit (one GPU): the run's k is measured already
            running["speculative"].stop()
        with serving.servers(engine, {name: bench.config(speculative=True, k=k)}) as extra:
            pair = {"baseline": running["baseline"], "speculative": extra[name]}
            for level in at:
                chosen[level]["measured"], _ = _level(bench, pair, model, int(level))
                chosen[level] = choosing.refit(chosen[level], levels[level], int(level), by_k, per_token)
        recipes[str(k)] = recipe(bench, k)
    choice: result.ChoiceOfK = {"run_k": run_k, "verifier_seconds_per_token": per_token, "prefill": prefill,
                                "levels": chosen, "recipes": recipes}  # fmt: skip
    ranges = scheduled.composed(levels, chosen, run_k)
    if ranges:
        choice["schedule"] = _schedule(bench, running, model, levels, ranges)
    return choice


def _schedule(
    bench: Workbench, running: dict[str, serving.Server], model: str, levels: dict[str, result.Level], ranges: list[Range]
) -> result.ServedSchedule:
    """Serve the schedule composed from the levels' best k beside the same baseline, time it at every level, and say
    whether it is the command to serve."""
    engine, run_k = load_engine(bench.spec.engine)(), bench.spec.num_speculative_tokens
    if not engine.serves_beside_offline():  # one GPU holds two servers: the fixed k's is measured already
        running["speculative"].stop()

    def timed(pair: Mapping[str, serving.Server], concurrency: int) -> result.Level:
        return _level(bench, pair, model, concurrency)[0]

    try:
        figures = scheduled.serve(engine, bench.config(speculative=True), ranges, running["baseline"],
                                  list(bench.spec.plan.concurrency), timed)  # fmt: skip
    except InfraError as failed:
        if failed.code != "serve:start-failed":
            raise
        return scheduled.not_served(ranges, run_k, recipe(bench, run_k, ranges), serving.engine_error(failed.message))
    return scheduled.outcome(ranges, figures, levels, run_k, recipe(bench, run_k, ranges))


def _rate_point(
    bench: Workbench, running: dict[str, serving.Server], model: str, levels: dict[str, result.Level], prompts: list[list[int]]
) -> result.RatePoint:
    plan = bench.spec.plan
    single = levels[str(min(plan.concurrency, key=int))]["baseline"]["requests_per_second"] or 1.0
    rate = plan.request_rate or 2 * single

    def block(server: serving.Server, repeat: int) -> timing.Block:
        arrivals = timing.poisson_arrivals(len(prompts), rate, seed=plan.seed + repeat)
        return timing.run_block(server, model, prompts, plan.output_tokens, concurrency=None, arrivals=arrivals)

    figures, _ = timing.precise_level(running, stopping_rule(plan, lowest=False), block, timing.latency_ratio)
    return {**figures, "request_rate": rate}


def stopping_rule(plan: Plan, *, lowest: bool) -> metrics.Stein:
    """The plan's precision: tighter at the lowest level, which the verdict reads."""
    return metrics.Stein(first=plan.repeats, most=plan.most_pairs, target=plan.half_width if lowest else plan.half_width_loaded)


def served_counters_check(bench: Workbench, server: serving.Server, model: str, *, served_figures: bool) -> result.ServedCounters:
    """Where this server gave the figures, its /metrics deltas against the sum of each request's own counters;
    else the greedy prompts again, per category as the offline engine took them, through the server's /metrics."""
    if served_figures:
        return _requests_against_metrics(bench)
    served = SpecCounters()
    for prompts in bench.by_category().values():
        before = serving.served_counters(server)
        serving.complete(server, model, prompts, bench.suite.max_tokens)
        served = served + (serving.served_counters(server) - before)
    assert bench.speculative is not None, "the speculative stage runs first"
    offline = total_counters(bench.speculative)
    return {"served": metrics.acceptance(served)["counts"], "offline": metrics.acceptance(offline)["counts"],
            "agree": served == offline}  # fmt: skip


def _requests_against_metrics(bench: Workbench) -> result.ServedCounters:
    """The pair server's greedy counters (its /metrics deltas) against the sum of its answers' own: vLLM counts both,
    and they agree unless a request went uncounted or another touched the server."""
    assert bench.speculative is not None, "the speculative stage runs first"
    own = bench.speculative.get("per_prompt", {})
    summed = sum((as_counters(raw) for prompts in own.values() for raw in prompts), SpecCounters())
    served = total_counters(bench.speculative)
    return {"served": metrics.acceptance(served)["counts"], "offline": metrics.acceptance(summed)["counts"],
            "agree": served == summed, "against": "requests"}  # fmt: skip


def served_commands(bench: Workbench, running: dict[str, serving.Server], start_seconds: float) -> result.Servers:
    """The commands that ran, and the lines to publish: the same arguments, naming the pinned Hub repos."""
    spec, conditions = bench.spec, bench.spec.plan.conditions
    verifier = (spec.verifier.repo_id, spec.verifier.sha)
    return {
        "baseline_command": without_local_paths(running["baseline"].command, bench),
        "speculative_command": without_local_paths(running["speculative"].command, bench),
        "baseline_recipe": serve_line(serve_arguments(*verifier, None, conditions)),
        "speculative_recipe": recipe(bench, spec.num_speculative_tokens),
        "start_seconds": start_seconds,
        "output_tokens": spec.plan.output_tokens,
    }


def recipe(bench: Workbench, k: int, ranges: list[Range] | None = None) -> str:
    """The `vllm serve` line to publish for the pair drafting `k` tokens a step (or on the batch-size schedule
    `ranges`): the gate's config, naming the pinned Hub repos, as the server that was measured ran it."""
    spec = bench.spec
    published = dict(bench.gate.recipe.speculative_config) if bench.gate and bench.gate.recipe else None
    if published is not None and k != spec.num_speculative_tokens:
        published["num_speculative_tokens"] = k
    if published is not None and ranges:
        published = schedule.speculative_config(published, ranges, installed_engine_build("vllm"))  # as measured
    return serve_line(serve_arguments(spec.verifier.repo_id, spec.verifier.sha, published, spec.plan.conditions))
