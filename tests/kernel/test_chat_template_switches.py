"""The chat template's switches (issue 53): named from the template's source, set as vLLM's chat API sets them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.errors import UserError
from kernel.formats import gate
from kernel.formats.chat_template import template_rule
from kernel.formats.inputs import GateInput, RepoMetadata
from kernel.traffic import ChatTemplate, Request, canonical, read_workload, render
from kernel.traffic.templates import switches, with_switch
from zoo.tokenizer import CHAT_TEMPLATE, CHAT_TEMPLATE_THINKING

VERIFIER = Path(__file__).resolve().parents[2] / "zoo" / "models" / "spechub-toy" / "llama-verifier"
ASKED = Request(1, "chat", messages=(("user", "Is the book dark?"),))


def thinking_config() -> dict[str, object]:
    config: dict[str, object] = json.loads((VERIFIER / "tokenizer_config.json").read_text())
    return {**config, "chat_template": CHAT_TEMPLATE_THINKING}


def test_it_names_the_thinking_switch_of_the_toy_verifiers_new_template_and_none_of_the_old_one():
    assert switches(ChatTemplate(CHAT_TEMPLATE_THINKING)).thinking == "enable_thinking"
    assert switches(ChatTemplate(CHAT_TEMPLATE)).names == ()


def test_it_reads_switches_without_rendering_and_leaves_out_what_every_renderer_passes():
    source = "{% set x = 1 %}{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{{ range(2)|list }}{{ foo.bar }}"
    assert switches(ChatTemplate(source + "{% if thinking %}t{% endif %}")).names == ("foo", "thinking")
    assert switches(ChatTemplate(source)).thinking is None


def test_a_template_that_does_not_parse_takes_no_switch_and_says_why():
    found = switches(ChatTemplate("{% if enable_thinking %}"))
    assert found.names == () and found.problem is not None and "does not parse" in found.problem


def test_the_switch_renders_as_vllms_chat_api_renders_it_through_transformers():
    from transformers import PreTrainedTokenizerFast

    template = ChatTemplate.from_tokenizer_config(thinking_config())
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(VERIFIER))
    messages = [{"role": "user", "content": "Is the book dark?"}]
    for on in (True, False):
        theirs = tokenizer.apply_chat_template(messages, chat_template=CHAT_TEMPLATE_THINKING, tokenize=False,
                                               add_generation_prompt=True, enable_thinking=on)  # fmt: skip
        assert render(with_switch(ASKED, "enable_thinking", on), template) == theirs
    assert render(ASKED, template) == render(with_switch(ASKED, "enable_thinking", True), template)  # on by default
    assert render(with_switch(ASKED, "enable_thinking", False), template).endswith("<|assistant|>\n<think>\n\n</think>\n")


def test_a_plain_prompt_is_asked_as_the_users_one_message():
    asked = with_switch(Request(1, "qa", prompt="Q: 1 + 1?"), "enable_thinking", False)
    assert asked.messages == (("user", "Q: 1 + 1?"),) and asked.chat_template_kwargs == {"enable_thinking": False}


def test_a_chat_line_keeps_its_chat_template_kwargs_and_they_are_part_of_its_identity():
    line = {"messages": [{"role": "user", "content": "hi"}]}
    plain = read_workload([json.dumps(line).encode()])
    off = read_workload([json.dumps({**line, "chat_template_kwargs": {"enable_thinking": False}}).encode()])
    assert off.sample[0].chat_template_kwargs == {"enable_thinking": False} and plain.sample[0].chat_template_kwargs is None
    assert plain.sha256 != off.sha256
    assert canonical(plain.sample[0]) == '{"c":"custom","m":[["user","hi"]],"n":32}'  # identities from before stay
    stored = off.sample[0].as_dict()
    assert Request.from_dict(stored).chat_template_kwargs == {"enable_thinking": False}
    assert off.sample[0].as_line()["chat_template_kwargs"] == {"enable_thinking": False}  # type: ignore[typeddict-item]


@pytest.mark.parametrize(
    "kwargs",
    [{"messages": []}, {"bos_token": "x"}, {"enable_thinking": {"nested": True}}, {"__class__": 1}, ["enable_thinking"],
     {f"k{i}": 1 for i in range(17)}, {"s": "x" * 201}],
)  # fmt: skip
def test_hostile_chat_template_kwargs_are_refused_with_the_line_named(kwargs):
    line = {"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": kwargs}
    with pytest.raises(UserError) as refused:
        read_workload([json.dumps(line).encode()])
    assert refused.value.code == "workload:invalid" and "line 1" in str(refused.value)


def _gate_input(tokenizer_config: dict[str, object]) -> GateInput:
    config = json.loads((VERIFIER / "config.json").read_text())
    verifier = RepoMetadata("spechub-toy/llama-verifier", "a" * 40, ["config.json"], config, None, tokenizer_config)
    return GateInput(verifier=verifier, verifier_id=verifier.repo_id, draft=None, method="ngram", k=2, options={})


def test_the_gate_names_the_thinking_switch_of_the_verifiers_template():
    found = [f.as_dict() for f in template_rule(gate.context(_gate_input(thinking_config())))]
    assert [(f["code"], f["severity"]) for f in found] == [("gate:template-thinking", "info")]
    assert "`enable_thinking`" in found[0]["message"] and "on and off" in found[0]["message"]
    assert not list(template_rule(gate.context(_gate_input({**thinking_config(), "chat_template": CHAT_TEMPLATE}))))
    broken = [f.code for f in template_rule(gate.context(_gate_input({"chat_template": "{% if x %}"})))]
    assert broken == ["gate:template-unreadable"]
    assert "gate:template-thinking" in [f.code for f in gate.judge(_gate_input(thinking_config())).findings]


def test_reading_a_hostile_templates_switches_evaluates_none_of_its_constants():
    """Issue 61 §1: Jinja's compiler folded `{{ 'a' * 300000000 }}` (300 MB) and towers of `**` while the gate only
    read the template's variables; an integer literal over 4,300 digits raised out of it (a 500)."""
    import tracemalloc

    tracemalloc.start()
    try:
        found = switches(ChatTemplate("{{ 'a' * 300000000 }}{{ 2**2**2**2**2**2**2**2 }}{{ reasoning_effort }}"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.names == ("reasoning_effort",) and found.measured == "reasoning_effort" and peak < 20 * 2**20
    huge = switches(ChatTemplate("{{ " + "9" * 5000 + " }}"))
    assert huge.names == () and huge.problem is not None and "4300 digits" in huge.problem
