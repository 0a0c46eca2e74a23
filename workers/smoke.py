"""The serving-feature smoke tier: does the pair serve, and serve the same greedy output, with the
features users combine with speculation?

Each feature is compared with the verifier alone *with the same feature*, so a feature that
changes output by itself (an fp8 KV cache does) is not blamed on the pair. Outcomes:
- equal: it runs, and greedy output equals the verifier alone's;
- differs: it runs, and output differs (where it first diverges);
- runs: it runs, and there is nothing greedy to compare (n > 1 samples);
- fails: the pair fails with it, while the verifier alone does not (the engine's own message);
- not-supported: the verifier alone fails with it too: this build does not serve the feature here;
- speculation off: it runs, but the pair's server drafted nothing during its requests, where the same
  requests without it drafted (engines have silently switched speculation off for some parameters);
- parameter ignored: with speculation the output is the one the request gives *without* the parameter,
  while the verifier alone's output changes with it;
- constraint broken: a structured output with speculation does not meet its constraint;
- not judged: the build has a per-request speculation switch that the grid does not test yet.

The request classes (workers/asking.py) are the sampling parameters users send and the structured outputs they ask
for; each is judged by the tests above, from the served spec-decode counters and the outputs.

Request features run on the servers the throughput stage already started (the published
command). Engine features need other flags: one pair of servers starts with all of them,
and only when that pair fails or differs are they split in halves, until each one at fault
is named (one feature at fault among three costs two more pairs, not three).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from kernel import result
from kernel.errors import InfraError, UserError
from kernel.spec import RunSpec
from workers import asking, baselines, serving
from workers.asking import Feature, Sides
from workers.engines.base import Engine, EngineConfig

ENGINE_FEATURES: dict[str, tuple[str, ...]] = {
    "prefix caching off": ("--no-enable-prefix-caching",),
    # A prefill budget far below the long prompt's length: it is prefilled in chunks.
    "chunked prefill": ("--enable-chunked-prefill", "--max-num-batched-tokens", "64"),
    "fp8 KV cache": ("--kv-cache-dtype", "fp8"),
}
OUTPUT_TOKENS = 24
CACHE_HITS = "vllm:prefix_cache_hits"


def request_features(
    sides: Sides, model: str, prompts: Sequence[list[int]], max_model_len: int, switches: Sequence[str] = ()
) -> list[Feature]:
    """The features a request asks for, on the published servers (prefix caching and chunked prefill on, by default)."""
    shared = _long(prompts, 200)
    repeated = [[*shared, *p] for p in prompts[:4]]
    mixed = [_long(prompts, n) for n in (8, 40, 90, 160, 240, 320, 400, 460)]
    near_max = _long(prompts, max_model_len - OUTPUT_TOKENS - 8)

    def cached(server: serving.Server) -> list[list[int]]:
        asking.generate(server, model, repeated, OUTPUT_TOKENS)  # the first pass fills the cache the second one reads
        return asking.generate(server, model, repeated, OUTPUT_TOKENS)

    def asked(requests: list[list[int]]) -> Callable[[serving.Server], list[list[int]]]:
        return lambda server: asking.generate(server, model, requests, OUTPUT_TOKENS)

    hits = serving.served_total(sides["speculative"], CACHE_HITS)
    return [
        _cache_read(asking.request_feature("prefix caching on", sides, cached), sides["speculative"], hits),
        asking.request_feature("prompt near the maximum length", sides, asked([near_max])),
        asking.request_feature("mixed prompt lengths, concurrent", sides, asked(mixed)),
        samples_feature(sides, model, prompts[0]),
        *asking.request_classes(sides, model, prompts),
        asking.switch_feature(switches),
    ]


def _cache_read(feature: Feature, server: serving.Server, before: float) -> Feature:
    """Say how many prompt tokens the pair's server read from its prefix cache meanwhile; none means caching was off."""
    hits = int(serving.served_total(server, CACHE_HITS) - before)
    if feature["outcome"] in ("equal", "differs") and not hits:
        return {**feature, "outcome": "not-supported", "detail": "the published servers cache no prefix on this build"}
    return {**feature, "detail": f"{feature['detail']}; {hits} prompt tokens read from the pair's prefix cache"}


def samples_feature(sides: Sides, model: str, prompt: list[int]) -> Feature:
    """n > 1 samples in one request: sampled, so it is checked to run and deliver, not compared."""
    n = 4

    def sampled(server: serving.Server) -> list[list[int]]:
        return asking.generate(server, model, [prompt], 16, n=n, temperature=1.0, ignore_eos=True)

    checked = asking.request_feature(f"n = {n} samples in one request", sides, sampled)
    if checked["outcome"] in ("equal", "differs"):
        return {"feature": checked["feature"], "outcome": "runs",
                "detail": f"{n} samples of 16 tokens each from both; sampled, so not compared token by token"}  # fmt: skip
    return checked


def _long(prompts: Sequence[list[int]], length: int) -> list[int]:
    """A prompt of exactly `length` tokens, made of the suite's prompts one after another."""
    tokens: list[int] = []
    while len(tokens) < length:
        for prompt in prompts:
            tokens += prompt
    return tokens[:length]


def flagged(configs: Mapping[str, EngineConfig], features: Sequence[str]) -> dict[str, EngineConfig]:
    """Both servers' configs with every one of these engine features' flags."""
    flags = tuple(flag for feature in features for flag in ENGINE_FEATURES[feature])
    return {side: replace(config, server_flags=flags) for side, config in configs.items()}


def refused_before(spec: RunSpec, features: Sequence[str] | None) -> dict[str, Feature]:
    """The engine features this build refused for this verifier alone on an earlier run, as the grid reports them: a
    property of the build, so no server is started again to learn it."""
    found: dict[str, Feature] = {}
    for feature in chosen(features):
        stored = baselines.load(baselines.refusal_key(spec, ENGINE_FEATURES[feature]))
        if isinstance(stored, dict) and isinstance(stored.get("error"), str):
            found[feature] = {"feature": feature, "outcome": "not-supported", "error": stored["error"], "refused_at_start": True,
                              "detail": "not supported on this build: the verifier alone would not start with it, found "
                                        "on an earlier run with this verifier, build, hardware and conditions"}  # fmt: skip
    return found


def remember_refusals(spec: RunSpec, grid: Sequence[Feature], known: Mapping[str, Feature]) -> None:
    """Keep each engine feature the verifier alone refused at its start in this run, with the engine's message."""
    for feature in grid:
        name = feature["feature"]
        if name in ENGINE_FEATURES and name not in known and feature.get("refused_at_start") and "error" in feature:
            baselines.store(baselines.refusal_key(spec, ENGINE_FEATURES[name]), {"error": feature["error"]})


def start_engine_features(
    engine: Engine, configs: Mapping[str, EngineConfig], features: Sequence[str] | None
) -> serving.Spawned | None:
    """Start the pair with every engine feature's flags now, where memory holds it beside the published pair (CPU:
    four servers, the offline engine long gone), so that it loads while the request features run on those. Nothing
    is timed by then."""
    names = chosen(features)
    if not names or not engine.serves_beside_offline():
        return None
    return serving.spawn(engine, flagged(configs, names))


def engine_features(
    engine: Engine,
    configs: Mapping[str, EngineConfig],
    model: str,
    prompts: Sequence[list[int]],
    features: Sequence[str],
    spawned: serving.Spawned | None = None,
) -> list[Feature]:
    """Serve the pair with these features' flags (`spawned` holds it, when it started early); on a failure or a
    difference, serve each half of them again."""
    if not features:
        return []
    alone = len(features) == 1
    outcome = _served_with(engine, flagged(configs, features), model, prompts, ", ".join(features), judge_start=alone,
                           spawned=spawned)  # fmt: skip
    if outcome["outcome"] == "equal" or alone:
        return [{**outcome, "feature": feature} for feature in features]
    half = (len(features) + 1) // 2
    return [f for part in (features[:half], features[half:]) for f in engine_features(engine, configs, model, prompts, part)]


def _not_supported(name: str, failed: InfraError) -> Feature:
    """The verifier alone would not start with the flags either: the build's. Kept for later runs only where it exited
    with an error of its own, not where it timed out or was killed."""
    found: Feature = {"feature": name, "outcome": "not-supported", "error": serving.engine_error(failed.message),
                      "detail": "not supported on this build: the verifier alone will not start with it either"}  # fmt: skip
    if isinstance(failed, serving.Exited) and (failed.returncode or 0) > 0:
        found["refused_at_start"] = True
    return found


def chosen(names: Sequence[str] | None) -> list[str]:
    """The engine features a plan names, in the tier's order; None names them all."""
    if names is None:
        return list(ENGINE_FEATURES)
    unknown = sorted(set(names) - set(ENGINE_FEATURES))
    if unknown:
        raise UserError("run:invalid-spec", f"Unknown smoke engine features {unknown}; choose from {list(ENGINE_FEATURES)}.")
    return [feature for feature in ENGINE_FEATURES if feature in names]


def _served_with(
    engine: Engine,
    with_flags: Mapping[str, EngineConfig],
    model: str,
    prompts: Sequence[list[int]],
    name: str,
    *,
    judge_start: bool,
    spawned: serving.Spawned | None = None,
) -> Feature:
    long_prompt = _long(prompts, next(iter(with_flags.values())).max_model_len - OUTPUT_TOKENS - 8)
    requests = [*prompts[:6], long_prompt, *prompts[:2]]  # the last two again: a cache would serve them
    try:
        with serving.servers(engine, with_flags, spawned) as sides:
            return asking.request_feature(name, sides, lambda s: asking.generate(s, model, requests, OUTPUT_TOKENS))
    except InfraError as failed:
        if failed.code != "serve:start-failed":
            raise
        if not judge_start:  # a group is split in any case: its halves say whose the failure is
            return {"feature": name, "outcome": "fails", "error": serving.engine_error(failed.message),
                    "detail": "the pair did not start with these features together"}  # fmt: skip
        if isinstance(failed, serving.Exited) and failed.server == "baseline":  # the verifier alone, with these flags
            return _not_supported(name, failed)
        return _start_failure(engine, with_flags["baseline"], name, failed.message)


def _start_failure(engine: Engine, baseline: EngineConfig, name: str, message: str) -> Feature:
    """A pair that would not start: not supported when the verifier alone will not start with the flags either."""
    try:
        with serving.servers(engine, {"baseline": baseline}):
            pass
    except InfraError as alone:
        return _not_supported(name, alone)
    return {"feature": name, "outcome": "fails", "error": serving.engine_error(message),
            "detail": "the verifier alone starts with it; with speculation the server does not"}  # fmt: skip


def tier(
    engine: Engine,
    configs: Mapping[str, EngineConfig],
    model: str,
    prompts: Sequence[list[int]],
    requested: list[Feature],
    features: Sequence[str] | None = None,
    spawned: serving.Spawned | None = None,
    known: Mapping[str, Feature] | None = None,
) -> result.Smoke:
    """The whole grid: the request features already run, then the engine features (`features`, or all of them) but
    those `known` already (refused on an earlier run); `spawned` holds their servers where they started early. With
    the time it took."""
    started, names, known = time.perf_counter(), chosen(features), known or {}
    served = engine_features(engine, configs, model, prompts, [name for name in names if name not in known], spawned)
    found = {**known, **{feature["feature"]: feature for feature in served}}
    return {"features": [*requested, *(found[name] for name in names)], "seconds": round(time.perf_counter() - started, 1)}
