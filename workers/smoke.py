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
  while the verifier alone's output changes with it.

The request classes (penalties, min_p, logit_bias, logprobs, stop strings) are the sampling parameters
users send; each is judged by both tests above, from the served spec-decode counters and the outputs.

Request features run on the servers the throughput stage already started (the published
command). Engine features need other flags: one pair of servers starts with all of them,
and only when that pair fails or differs are they split in halves, until each one at fault
is named (one feature at fault among three costs two more pairs, not three).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx

from kernel import result
from kernel.errors import InfraError, UserError
from workers import metrics, serving
from workers.engines.base import Engine, EngineConfig

ENGINE_FEATURES: dict[str, tuple[str, ...]] = {
    "prefix caching off": ("--no-enable-prefix-caching",),
    # A prefill budget far below the long prompt's length: it is prefilled in chunks.
    "chunked prefill": ("--enable-chunked-prefill", "--max-num-batched-tokens", "64"),
    "fp8 KV cache": ("--kv-cache-dtype", "fp8"),
}
JSON_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
               "required": ["name", "age"]}  # fmt: skip
OUTPUT_TOKENS = 24
CLASS_TOKENS = 16  # the request classes: seven of them, so shorter; a penalty or a bias shows within 16 tokens
CACHE_HITS = "vllm:prefix_cache_hits"
Feature = result.SmokeFeature
Outputs = list[list[int]]
Sides = Mapping[str, serving.Server]


class Refused(Exception):
    """A server answered a request with an error; `message` is the engine's own."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(message)
        self.server, self.message = server, message


def generate(server: serving.Server, model: str, prompts: Sequence[list[int]], max_tokens: int, **extra: Any) -> list[list[int]]:
    """One completions request per prompt, all at once; the generated token ids of every choice, in order."""

    def one(prompt: list[int]) -> list[list[int]]:
        body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "return_token_ids": True,
                **extra}  # fmt: skip
        answer = httpx.post(f"{server.url}/v1/completions", json=body, timeout=300)
        if answer.status_code != 200:
            raise Refused(server.name, _message(answer))
        return [list(c.get("token_ids") or []) for c in sorted(answer.json()["choices"], key=lambda c: c["index"])]

    with ThreadPoolExecutor(max(1, len(prompts))) as pool:
        return [ids for choices in pool.map(one, prompts) for ids in choices]


def _message(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("error", {}).get("message") or answer.text)[:500]
    except ValueError:
        return answer.text[:500]


def compared(feature: str, base: list[list[int]], spec: list[list[int]]) -> Feature:
    """Compare the pair's greedy outputs with the verifier alone's, request by request."""
    diverging = [
        (i, at) for i, (a, b) in enumerate(zip(base, spec, strict=True)) if (at := metrics.first_divergence(a, b)) is not None
    ]
    if not diverging:
        return {"feature": feature, "outcome": "equal",
                "detail": f"{len(base)} requests, greedy output equal to the verifier alone's with it"}  # fmt: skip
    request, token = diverging[0]
    detail = f"{len(diverging)} of {len(base)} requests differ; the first at request {request}, token {token}"
    return {"feature": feature, "outcome": "differs", "divergence": {"request": request, "token": token}, "detail": detail}


def request_feature(feature: str, sides: Sides, call: Callable[[serving.Server], list[list[int]]]) -> Feature:
    """Run one request feature on both servers: refused by the verifier alone is not supported; by the pair, fails."""
    served = both(feature, sides, call)
    return served if isinstance(served, dict) else compared(feature, *served)


def both(feature: str, sides: Sides, call: Callable[[serving.Server], list[list[int]]]) -> tuple[Outputs, Outputs] | Feature:
    """The verifier alone's outputs and the pair's, or the refusal as a feature: not supported, or the pair fails."""
    try:
        base = call(sides["baseline"])
    except Refused as refused:
        return {"feature": feature, "outcome": "not-supported", "error": refused.message,
                "detail": "not supported on this build: the verifier alone refuses it too"}  # fmt: skip
    try:
        spec = call(sides["speculative"])
    except Refused as refused:
        return {"feature": feature, "outcome": "fails", "error": refused.message,
                "detail": "the verifier alone serves it; with speculation the engine refuses it"}  # fmt: skip
    return base, spec


# The sampling parameters users send with speculation, each strong enough to change a greedy output when honoured.
REQUEST_CLASSES: dict[str, dict[str, Any]] = {
    "frequency penalty": {"frequency_penalty": 1.5},
    "presence penalty": {"presence_penalty": 1.5},
    "repetition penalty": {"repetition_penalty": 1.5},
    "min_p": {"min_p": 0.3},
    "logit_bias": {},  # against the verifier's first greedy token, chosen when the grid runs
    "logprobs": {"logprobs": 5},
    "stop strings": {"stop": ["\n"]},
}


def request_classes(sides: Sides, model: str, prompts: Sequence[list[int]]) -> list[Feature]:
    """Each request class against the same requests without it: did the pair draft during it, and does its output
    follow the parameter as the verifier alone's does."""
    asked = list(prompts[:2])
    plain = generate(sides["baseline"], model, asked, CLASS_TOKENS)
    before = serving.served_counters(sides["speculative"]).drafts  # nothing else is sent to the server meanwhile
    generate(sides["speculative"], model, asked, CLASS_TOKENS)
    drafted = serving.served_counters(sides["speculative"]).drafts - before
    classes = {**REQUEST_CLASSES, "logit_bias": {"logit_bias": {str(plain[0][0]): -100}} if plain[0] else {}}
    return [_request_class(name, extra, sides, model, asked, plain, drafted > 0) for name, extra in classes.items()]


def _request_class(name: str, extra: dict[str, Any], sides: Sides, model: str, asked: list[list[int]], plain: Outputs,
                   drafting: bool) -> Feature:  # fmt: skip
    before = serving.served_counters(sides["speculative"]).drafts  # the verifier alone's server counts no drafts
    served = both(name, sides, lambda server: generate(server, model, asked, CLASS_TOKENS, **extra))
    moved = serving.served_counters(sides["speculative"]).drafts - before
    if isinstance(served, dict):
        return served
    base, spec = served
    found = compared(name, base, spec)
    if drafting and not moved:
        return {**found, "outcome": "speculation off",
                "detail": f"the pair's server drafted nothing during these requests, and drafted without {name}; "
                          f"{found['detail']}"}  # fmt: skip
    if found["outcome"] == "differs" and spec == plain and base != plain:
        return {**found, "outcome": "parameter ignored",
                "detail": f"with speculation the output is the one without {name}, while the verifier alone's follows it; "
                          f"{found['detail']}"}  # fmt: skip
    return {**found, "detail": f"{found['detail']}; {moved} drafting steps with it"}


def request_features(sides: Sides, model: str, prompts: Sequence[list[int]], max_model_len: int) -> list[Feature]:
    """The features a request asks for, on the published servers (prefix caching and chunked prefill on, by default)."""
    shared = _long(prompts, 200)
    repeated = [[*shared, *p] for p in prompts[:4]]
    mixed = [_long(prompts, n) for n in (8, 40, 90, 160, 240, 320, 400, 460)]
    near_max = _long(prompts, max_model_len - OUTPUT_TOKENS - 8)

    def cached(server: serving.Server) -> list[list[int]]:
        generate(server, model, repeated, OUTPUT_TOKENS)  # the first pass fills the cache the second one reads
        return generate(server, model, repeated, OUTPUT_TOKENS)

    hits = serving.served_total(sides["speculative"], CACHE_HITS)
    features = [
        _cache_read(request_feature("prefix caching on", sides, cached), sides["speculative"], hits),
        request_feature("structured output (JSON schema)", sides,
                        lambda s: generate(s, model, prompts[:2], 48, structured_outputs={"json": JSON_SCHEMA})),
        request_feature("prompt near the maximum length", sides, lambda s: generate(s, model, [near_max], OUTPUT_TOKENS)),
        request_feature("mixed prompt lengths, concurrent", sides, lambda s: generate(s, model, mixed, OUTPUT_TOKENS)),
        samples_feature(sides, model, prompts[0]),
        *request_classes(sides, model, prompts),
    ]  # fmt: skip
    return features


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
        return generate(server, model, [prompt], 16, n=n, temperature=1.0, ignore_eos=True)

    checked = request_feature(f"n = {n} samples in one request", sides, sampled)
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


def engine_features(
    engine: Engine, configs: Mapping[str, EngineConfig], model: str, prompts: Sequence[list[int]], features: Sequence[str]
) -> list[Feature]:
    """Serve the pair with these features' flags; on a failure or a difference, serve each half of them again."""
    flags = tuple(flag for feature in features for flag in ENGINE_FEATURES[feature])
    alone = len(features) == 1
    outcome = _served_with(engine, configs, flags, model, prompts, ", ".join(features), judge_start=alone)
    if outcome["outcome"] == "equal" or alone:
        return [{**outcome, "feature": feature} for feature in features]
    half = (len(features) + 1) // 2
    return [f for part in (features[:half], features[half:]) for f in engine_features(engine, configs, model, prompts, part)]


def _not_supported(name: str, message: str) -> Feature:
    return {"feature": name, "outcome": "not-supported", "error": serving.engine_error(message),
            "detail": "not supported on this build: the verifier alone will not start with it either"}  # fmt: skip


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
    configs: Mapping[str, EngineConfig],
    flags: tuple[str, ...],
    model: str,
    prompts: Sequence[list[int]],
    name: str,
    *,
    judge_start: bool,
) -> Feature:
    with_flags = {side: replace(config, server_flags=flags) for side, config in configs.items()}
    long_prompt = _long(prompts, next(iter(configs.values())).max_model_len - OUTPUT_TOKENS - 8)
    requests = [*prompts[:6], long_prompt, *prompts[:2]]  # the last two again: a cache would serve them
    try:
        with serving.servers(engine, with_flags) as sides:
            return request_feature(name, sides, lambda s: generate(s, model, requests, OUTPUT_TOKENS))
    except InfraError as failed:
        if failed.code != "serve:start-failed":
            raise
        if not judge_start:  # a group is split in any case: its halves say whose the failure is
            return {"feature": name, "outcome": "fails", "error": serving.engine_error(failed.message),
                    "detail": "the pair did not start with these features together"}  # fmt: skip
        if isinstance(failed, serving.Exited) and failed.server == "baseline":  # the verifier alone, with these flags
            return _not_supported(name, failed.message)
        return _start_failure(engine, with_flags["baseline"], name, failed.message)


def _start_failure(engine: Engine, baseline: EngineConfig, name: str, message: str) -> Feature:
    """A pair that would not start: not supported when the verifier alone will not start with the flags either."""
    try:
        with serving.servers(engine, {"baseline": baseline}):
            pass
    except InfraError as alone:
        return _not_supported(name, alone.message)
    return {"feature": name, "outcome": "fails", "error": serving.engine_error(message),
            "detail": "the verifier alone starts with it; with speculation the server does not"}  # fmt: skip


def tier(
    engine: Engine,
    configs: Mapping[str, EngineConfig],
    model: str,
    prompts: Sequence[list[int]],
    requested: list[Feature],
    features: Sequence[str] | None = None,
) -> result.Smoke:
    """The whole grid: the request features already run, then the engine features (`features`, or all of them);
    with the time it took."""
    started = time.perf_counter()
    found = engine_features(engine, configs, model, prompts, chosen(features))
    return {"features": [*requested, *found], "seconds": round(time.perf_counter() - started, 1)}
