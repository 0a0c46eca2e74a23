"""The smoke tier's judgements, constructed (no engine): comparison, attribution, the engine's own message."""

from __future__ import annotations

from workers import smoke


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
    assert smoke.engine_error(tail) == "ValueError: fp8 KV cache is not supported here"


def test_long_prompts_are_built_to_the_exact_length_from_the_suite_constructed():
    assert smoke._long([[1, 2, 3], [4]], 10) == [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
