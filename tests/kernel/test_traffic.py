"""kernel.traffic: five formats, streamed, checked line by line, counted, sampled and identified by content."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.errors import UserError
from kernel.traffic import ChatTemplate, Encode, Limits, Request, Workload, read_workload, render, rendered
from kernel.traffic.templates import rendered_texts

VERIFIER = Path(__file__).parents[2] / "zoo/models/spechub-toy/llama-verifier"


def read(text: str, **limits: int) -> Workload:
    return read_workload([text.encode()], limits=Limits(**limits))


def refusal(text: str, **limits: int) -> UserError:
    with pytest.raises(UserError) as refused:
        read(text, **limits)
    return refused.value


def jsonl(*items: object) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


CHAT = {"messages": [{"role": "user", "content": "Is the tree small?"}], "max_tokens": 16, "category": "chat"}
CODE = {"prompt": "def total_46(x):\n", "output_tokens": 16, "category": "code"}


def test_openai_chat_and_vllm_custom_jsonl_lines_are_read_with_their_categories_and_lengths():
    workload = read(jsonl(CHAT, CODE, {"prompt": "hello"}))
    assert workload.format == "openai-chat"
    assert [(r.category, r.max_tokens, r.line) for r in workload.sample] == [("chat", 16, 1), ("code", 16, 2), ("custom", 32, 3)]
    assert workload.sample[0].messages == (("user", "Is the tree small?"),)


def test_sharegpt_takes_each_conversation_up_to_its_last_human_turn():
    turns = [("human", "Hi"), ("gpt", "Hello"), ("human", "Is the tree small?"), ("gpt", "No")]
    conversations = [{"conversations": [{"from": who, "value": said} for who, said in turns]}]
    workload = read(json.dumps(conversations))
    assert workload.format == "sharegpt"
    assert workload.sample[0].messages == (("user", "Hi"), ("assistant", "Hello"), ("user", "Is the tree small?"))


def test_plain_text_and_spechubs_suite_are_read_too():
    text = read("first prompt\n\nsecond prompt\n")
    assert (text.format, [r.prompt for r in text.sample]) == ("text", ["first prompt", "second prompt"])
    suite = read((Path(__file__).parents[2] / "workers/suites/toy-v2.json").read_text())
    assert suite.format == "suite" and suite.categories["code"] == 4 and suite.unique == 31  # of 32: one prompt repeats


def test_identical_requests_are_counted_not_repeated():
    workload = read(jsonl(CODE, CHAT, CODE, CODE))
    assert (workload.total, workload.unique, workload.sampled) == (4, 2, 2)
    assert {r.category: r.count for r in workload.sample} == {"code": 3, "chat": 1}


def test_the_identity_is_the_content_whatever_the_order_or_the_format():
    as_chat = read(jsonl(CHAT, CODE))
    reordered = read(jsonl(CODE, CHAT))
    sharegpt = read(json.dumps([{"conversations": [{"from": "human", "value": "Is the tree small?"}], "category": "chat"}]))
    chat_only = read(jsonl({**CHAT, "max_tokens": 32}))
    assert as_chat.sha256 == reordered.sha256
    assert sharegpt.sha256 == chat_only.sha256  # the same request, asked as ShareGPT and as OpenAI JSONL
    assert as_chat.sha256 != chat_only.sha256


def test_a_large_upload_is_down_sampled_with_a_seed_the_same_way_in_any_order():
    lines = [{"prompt": f"question {i}?"} for i in range(10_000)]
    first = read(jsonl(*lines), sample_size=200)
    backwards = read(jsonl(*reversed(lines)), sample_size=200)
    other_seed = read(jsonl(*lines), sample_size=200, seed=1)
    assert (first.total, first.sampled) == (10_000, 200)
    assert {r.prompt for r in first.sample} == {r.prompt for r in backwards.sample}
    assert {r.prompt for r in first.sample} != {r.prompt for r in other_seed.sample}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (jsonl(CODE) + '{"prompt": "unclosed\n', "line 2: not valid JSON"),
        (
            jsonl(CHAT, {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": 3}]}),
            "line 2: `messages[1].content` is not a string",
        ),
        (jsonl({"messages": [{"role": "wizard", "content": "a"}]}), "line 1: `messages[0].role` must be one of"),
        (jsonl(CODE, CODE, {"prompt": "x", "category": "poetry"}), "line 3: `category` must be one of"),
        (jsonl({"prompt": "x", "output_tokens": -1}), "line 1: `output_tokens` must be an integer"),
        (jsonl({"prompt": "x", "output_tokens": True}), "line 1: `output_tokens` must be an integer"),
        (jsonl({"question": "x"}), "line 1: the object has neither `messages`"),
        ('{"prompt": NaN}\n', "line 1: not valid JSON"),
        (
            '{"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"t": 1e400}}\n',
            "line 1: not valid JSON (1e400 is past the largest number",
        ),
        ("[" * 100_000 + "]" * 100_000, "line 1: "),
        ('[{"conversations": []}, 3]', "line 1: `conversations` has no human turn"),
        (
            jsonl({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}),
            "ends with an assistant",
        ),
        ("ok\n\xff\n", "line 2: the bytes are not UTF-8"),  # written as latin-1 below
        ("", "holds no requests"),
    ],
)
def test_every_refusal_names_the_line_and_the_field(text, said):
    raw = text.encode("latin-1") if "\xff" in text else text.encode()
    with pytest.raises(UserError) as refused:
        read_workload([raw])
    assert said in refused.value.message


def fifty_megabytes() -> Iterator[bytes]:
    line = (json.dumps({"prompt": "x" * 1000}) + "\n").encode()
    for _ in range(50 * 1024):
        yield line


def test_a_50_megabyte_upload_is_refused_at_the_line_that_passes_the_limit_without_reading_the_rest():
    chunks = fifty_megabytes()
    with pytest.raises(UserError) as refused:
        read_workload(chunks, limits=Limits(max_bytes=20 * 1024 * 1024))
    assert refused.value.code == "workload:too-large"
    assert "passes 20,971,520 bytes" in refused.value.message and "line 2" in refused.value.message
    assert sum(1 for _ in chunks) > 25_000  # the rest was never pulled


def test_more_requests_than_the_limit_are_refused():
    assert refusal(jsonl(*[{"prompt": f"p{i}"} for i in range(11)]), max_requests=10).code == "workload:too-large"


def verifier_template() -> tuple[ChatTemplate | None, Encode]:
    from tokenizers import Tokenizer

    config = json.loads((VERIFIER / "tokenizer_config.json").read_text())
    tokenizer = Tokenizer.from_file(str(VERIFIER / "tokenizer.json"))
    return ChatTemplate.from_tokenizer_config(config), lambda text: len(tokenizer.encode(text).ids)


def test_chat_messages_are_rendered_with_the_verifiers_own_template_and_measured():
    template, encode = verifier_template()
    done = rendered(read(jsonl(CHAT, CODE)), template, encode, max_model_len=512)
    assert done.sample[0].text == "<|bos|><|user|>\nIs the tree small?\n<|assistant|>\n"
    assert done.sample[1].text == "def total_46(x):\n" and done.sample[1].tokens == encode("def total_46(x):\n")


def test_a_prompt_over_the_length_limit_after_templating_is_refused_naming_its_line():
    template, encode = verifier_template()
    long = {"messages": [{"role": "user", "content": "the small tree " * 200}], "max_tokens": 32}
    with pytest.raises(UserError) as refused:
        rendered(read(jsonl(CHAT, long)), template, encode, max_model_len=512)
    assert refused.value.code == "workload:too-long"
    assert "line 2: the prompt is" in refused.value.message and "over the maximum model length 512" in refused.value.message


@pytest.mark.parametrize(
    "source",
    [
        "{{ messages.__class__.__mro__[1].__subclasses__() }}",
        "{{ ''.__class__.__base__ }}",
        "{% for m in messages %}{{ m.__class__.__init__ }}{% endfor %}",
        "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
        "{% set x = messages.append(1) %}{{ x }}",
    ],
)
def test_a_template_that_reaches_for_python_internals_is_refused(source):
    with pytest.raises(UserError) as refused:
        render(Request(7, "chat", messages=(("user", "hi"),)), ChatTemplate(source))
    assert refused.value.code in ("workload:template-unsafe", "workload:template-invalid")
    assert "line 7:" in refused.value.message


@pytest.mark.parametrize(
    ("source", "spent"),
    [
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "of CPU time"),
        ("{{ 'a' * 1000000000 }}", "asked for more than 512 MiB"),
        ("{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}", "asked for more than 512 MiB"),
    ],
)  # fmt: skip
def test_a_template_whose_loops_or_strings_have_no_end_is_refused_when_it_spends_its_budget(source, spent):
    chats = [Request(line, "chat", messages=(("user", "hi"),)) for line in range(1, 201)]
    with pytest.raises(UserError) as refused:
        rendered_texts(chats, ChatTemplate(source))
    assert refused.value.code == "workload:template-too-costly" and spent in refused.value.message
    assert "Rendering the 200 sampled requests" in refused.value.message


@pytest.mark.parametrize("family", ["llama", "qwen3", "gpt-oss", "gemma4"])
def test_a_bounded_render_gives_the_same_texts_and_the_same_refusals_as_one_in_process(family):
    config = json.loads((VERIFIER.parent / f"{family}-verifier" / "tokenizer_config.json").read_text())
    template = ChatTemplate.from_tokenizer_config(config)
    chats = [Request(line, "chat", messages=(("user", f"q{line}"),)) for line in range(1, 4)]
    assert template is not None and rendered_texts(chats, template) == [render(request, template) for request in chats]
    with pytest.raises(UserError) as refused:
        rendered_texts(chats, ChatTemplate("{{ ''.__class__ }}"))
    assert refused.value.code == "workload:template-unsafe" and "line 1:" in refused.value.message


def test_a_template_raising_its_own_error_is_reported_with_the_templates_message():
    template = ChatTemplate("{{ raise_exception('Only user and assistant roles are supported') }}")
    with pytest.raises(UserError) as refused:
        render(Request(3, "chat", messages=(("system", "hi"),)), template)
    assert refused.value.code == "workload:template-invalid" and "Only user and assistant" in refused.value.message


def test_a_request_survives_its_stored_form_and_its_jsonl_line():
    workload = read(jsonl(CHAT, CODE))
    for request in workload.sample:
        assert Request.from_dict(request.as_dict()) == request
    again = read(jsonl(*(r.as_line() for r in workload.sample)))
    assert again.sha256 == workload.sha256
