"""Asking both servers the same requests, and judging the answers: the smoke tier's primitives, and its request
classes (workers/smoke.py says what each outcome means).

The request classes are the sampling parameters users send (penalties, min_p, logit_bias, logprobs, stop strings)
and the structured outputs they ask for (a JSON schema, a choice, a regex, through the engine's default backend).
Each is judged from the served spec-decode counters (did the pair draft during it), the outputs (equal to the
verifier alone's, or the one the request gives without the parameter) and, for structured output, the constraint.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar

import httpx
import jsonschema

from kernel import result
from workers import metrics, serving

CLASS_TOKENS = 16  # the request classes: ten of them, so shorter; a penalty or a bias shows within 16 tokens
Feature = result.SmokeFeature
Outputs = list[list[int]]
Sides = Mapping[str, serving.Server]


class Refused(Exception):
    """A server answered a request with an error; `message` is the engine's own."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(message)
        self.server, self.message = server, message


class Choice(NamedTuple):
    token_ids: list[int]
    text: str
    finish_reason: str | None


def complete(server: serving.Server, model: str, prompts: Sequence[list[int]], max_tokens: int, **extra: Any) -> list[Choice]:
    """One completions request per prompt, all at once, greedy unless `extra` says otherwise; every choice, in order."""

    def one(prompt: list[int]) -> list[Choice]:
        body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "return_token_ids": True,
                **extra}  # fmt: skip
        answer = httpx.post(f"{server.url}/v1/completions", json=body, timeout=300)
        if answer.status_code != 200:
            raise Refused(server.name, _message(answer))
        choices = sorted(answer.json()["choices"], key=lambda c: c["index"])
        return [Choice(list(c.get("token_ids") or []), str(c.get("text") or ""), c.get("finish_reason")) for c in choices]

    with ThreadPoolExecutor(max(1, len(prompts))) as pool:
        return [choice for choices in pool.map(one, prompts) for choice in choices]


def generate(server: serving.Server, model: str, prompts: Sequence[list[int]], max_tokens: int, **extra: Any) -> Outputs:
    """The generated token ids of every choice, in order."""
    return [choice.token_ids for choice in complete(server, model, prompts, max_tokens, **extra)]


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


Served = TypeVar("Served")


def both(feature: str, sides: Sides, call: Callable[[serving.Server], Served]) -> tuple[Served, Served] | Feature:
    """The verifier alone's outputs and the pair's, or the refusal as a feature: not supported, or the pair fails."""
    with ThreadPoolExecutor(2) as pool:  # side by side: each server's worker has a core of its own, nothing is timed
        asked = {side: pool.submit(call, sides[side]) for side in ("baseline", "speculative")}
    try:
        base = asked["baseline"].result()
    except Refused as refused:
        return {"feature": feature, "outcome": "not-supported", "error": refused.message,
                "detail": "not supported on this build: the verifier alone refuses it too"}  # fmt: skip
    try:
        spec = asked["speculative"].result()
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


# The constraints users send with speculation, each through the engine's default structured-output backend; an
# output must satisfy its own. The choice and the regex finish within STRUCTURED_TOKENS on the toy zoo; its verifier
# pads a JSON object with whitespace past them, and an output cut at the limit is not judged.
CHOICES = ["yes", "no", "maybe"]
PATTERN = r"[0-9]{3}-[a-z]{2,4}"
ANSWER = {"type": "object", "properties": {"answer": {"enum": CHOICES}}, "required": ["answer"],
          "additionalProperties": False}  # fmt: skip
STRUCTURED: dict[str, dict[str, Any]] = {
    "structured output: JSON schema": {"response_format": {"type": "json_schema", "json_schema": {"name": "answer",
                                                                                                  "schema": ANSWER}}},
    "structured output: choice": {"structured_outputs": {"choice": CHOICES}},
    "structured output: regex": {"structured_outputs": {"regex": PATTERN}},
}  # fmt: skip
STRUCTURED_TOKENS = 48


def satisfies(name: str, text: str) -> bool:
    """Whether an output meets its structured class's constraint."""
    if name.endswith("choice"):
        return text in CHOICES
    if name.endswith("regex"):
        return re.fullmatch(PATTERN, text) is not None
    try:
        jsonschema.validate(json.loads(text), ANSWER)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def request_classes(sides: Sides, model: str, prompts: Sequence[list[int]]) -> list[Feature]:
    """Each request class against the same requests without it: did the pair draft during it, does its output follow
    the parameter as the verifier alone's does, and (structured output) does it meet its constraint."""
    asked = list(prompts[:2])
    plain = generate(sides["baseline"], model, asked, CLASS_TOKENS)
    before = serving.served_counters(sides["speculative"]).drafts  # nothing else is sent to the server meanwhile
    generate(sides["speculative"], model, asked, CLASS_TOKENS)
    drafting = serving.served_counters(sides["speculative"]).drafts > before
    classes = {**REQUEST_CLASSES, "logit_bias": {"logit_bias": {str(plain[0][0]): -100}} if plain[0] else {}}
    return [
        *(_request_class(name, extra, sides, model, asked, plain, drafting) for name, extra in classes.items()),
        *(_request_class(name, extra, sides, model, asked, plain, drafting, structured=True)
          for name, extra in STRUCTURED.items()),
    ]  # fmt: skip


def _request_class(name: str, extra: dict[str, Any], sides: Sides, model: str, asked: list[list[int]], plain: Outputs,
                   drafting: bool, *, structured: bool = False) -> Feature:  # fmt: skip
    before = serving.served_counters(sides["speculative"]).drafts  # the verifier alone's server counts no drafts
    tokens = STRUCTURED_TOKENS if structured else CLASS_TOKENS
    served = both(name, sides, lambda server: complete(server, model, asked, tokens, **extra))
    moved = serving.served_counters(sides["speculative"]).drafts - before
    if isinstance(served, dict):
        return served
    base, spec = ([choice.token_ids for choice in side] for side in served)
    found = compared(name, base, spec)
    broken, constraint = _constraint(name, *served) if structured else (False, "")
    if broken:
        return {**found, "outcome": "constraint broken", "detail": f"{constraint}; {found['detail']}; {moved} drafting steps"}
    found["detail"] = f"{found['detail']}; {constraint}" if constraint else found["detail"]
    if drafting and not moved:
        why = "; vLLM drops a draft's tokens that the constraint forbids before verifying them" if structured else ""
        return {**found, "outcome": "speculation off",
                "detail": f"the pair's server drafted nothing during these requests, and drafted without {name}{why}; "
                          f"{found['detail']}"}  # fmt: skip
    if found["outcome"] == "differs" and _follows(spec, plain) and not _follows(base, plain):
        return {**found, "outcome": "parameter ignored",
                "detail": f"with speculation the output is the one without {name}, while the verifier alone's follows it; "
                          f"{found['detail']}"}  # fmt: skip
    return {**found, "detail": f"{found['detail']}; {moved} drafting steps with it"}


def _follows(outputs: Outputs, plain: Outputs) -> bool:
    """Whether each output begins with the output the same request gives without the parameter."""
    return all(output[: len(without)] == without for output, without in zip(outputs, plain, strict=True))


def _constraint(name: str, base: list[Choice], spec: list[Choice]) -> tuple[bool, str]:
    """Whether the pair broke the constraint where the verifier alone met it (the draft's doing, through the engine),
    and a sentence on it; where both break it, it is the backend's, not the draft's. Outputs cut at the token limit on
    either side are not judged."""
    judged = [
        (i, b, s) for i, (b, s) in enumerate(zip(base, spec, strict=True)) if "length" not in (b.finish_reason, s.finish_reason)
    ]
    cut = f"{len(spec) - len(judged)} cut at {STRUCTURED_TOKENS} tokens, not judged"
    pair = [i for i, b, s in judged if not satisfies(name, s.text) and satisfies(name, b.text)]
    both = [i for i, b, s in judged if not satisfies(name, s.text) and not satisfies(name, b.text)]
    if pair:
        return True, (f"{len(pair)} of {len(spec)} outputs with speculation break the constraint where the verifier "
                      f"alone's meets it, the first at request {pair[0]} ({spec[pair[0]].text[:100]!r}); {cut}")  # fmt: skip
    if both:
        return False, (f"{len(both)} of {len(spec)} outputs break the constraint with speculation and without it: the "
                       f"backend's, not the draft's; {cut}")  # fmt: skip
    return False, f"the constraint met by {len(judged)} of {len(spec)} outputs with speculation ({cut})"


def switch_feature(fields: Sequence[str]) -> Feature:
    """A per-request way to turn speculation off: absent from this build, or present and not yet judged here."""
    name = "per-request speculation switch"
    if not fields:
        return {"feature": name, "outcome": "not-supported",
                "detail": "this build has no request field that turns speculation off for one request (none of its "
                          "completions request or sampling fields names speculation or drafts)"}  # fmt: skip
    return {"feature": name, "outcome": "not judged",
            "detail": f"this build's requests take {', '.join(fields)}; the grid does not test them yet"}  # fmt: skip
