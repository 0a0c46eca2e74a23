"""The six formats an upload may come in, detected from its content and read as a stream, line by line.

Every refusal names the line and the field at fault. The requests read go to `sample.collect`, which counts,
samples and digests them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

from kernel.errors import UserError
from kernel.traffic import speed_bench
from kernel.traffic.requests import (
    CUSTOM,
    KINDS,
    ROLES,
    SHAREGPT_ROLES,
    Limits,
    Message,
    Request,
    TemplateValue,
    Workload,
    refuse,
)
from kernel.traffic.sample import collect
from kernel.traffic.templates import RENDERER_VARIABLES

DEFAULT_LIMITS = Limits()


def read_workload(chunks: Iterable[bytes], *, limits: Limits = DEFAULT_LIMITS) -> Workload:
    """Return the workload in `chunks` (a file's bytes, streamed); every refusal names its line and field."""
    lines = _bounded_lines(chunks, limits.max_bytes)
    first = _first_content(lines)
    if first is None:
        raise UserError("workload:invalid", "The file holds no requests.")
    number, head = first
    stripped = head.lstrip()
    if stripped.startswith("{") and _is_request_line(stripped):
        if speed_bench.is_record(json.loads(stripped)):
            return collect(speed_bench.FORMAT, _records(number, head, lines, limits), limits)
        kind = "openai-chat" if '"messages"' in stripped else "vllm-custom"  # named by its first line; the two may mix
        return collect(kind, _jsonl(number, head, lines, limits), limits)
    if stripped.startswith(("{", "[")):
        document = _json_document(number, head, lines)
        if isinstance(document, list) and document and speed_bench.is_record(document[0]):
            return collect(speed_bench.FORMAT, _record_list(document, limits), limits)
        if isinstance(document, list):
            return collect("sharegpt", _sharegpt(document, limits), limits)
        return collect("suite", _suite(document, limits), limits)
    return collect("text", _text(number, head, lines, limits), limits)


def _bounded_lines(chunks: Iterable[bytes], max_bytes: int) -> Iterator[tuple[int, str]]:
    """Yield (line number, text) from byte chunks, refusing once more than `max_bytes` came in."""
    seen, pending, number = 0, b"", 0
    for chunk in chunks:
        seen += len(chunk)
        if seen > max_bytes:
            raise UserError("workload:too-large", f"line {number + 1}: the upload passes {max_bytes:,} bytes, the limit.")
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            number += 1
            yield number, _decode(number, raw)
    if pending:
        yield number + 1, _decode(number + 1, pending)


def _decode(number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError as exc:
        raise refuse(number, f"the bytes are not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _first_content(lines: Iterator[tuple[int, str]]) -> tuple[int, str] | None:
    for number, text in lines:
        if text.strip():
            return number, text.lstrip("\ufeff")
    return None


def _is_request_line(text: str) -> bool:
    """A first line that is a whole JSON object starts JSONL, unless it is a one-line suite document."""
    try:
        item = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(item, dict) and not ("categories" in item and "messages" not in item and "prompt" not in item)


def _loads(number: int, text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise refuse(number, "the JSON is nested too deeply") from None
    except ValueError as exc:
        raise refuse(number, f"not valid JSON ({exc})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    """A JSON number as a float, refused where it overflows: `1e400` parses as infinity, which no store takes."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is past the largest number a float holds")
    return value


def _jsonl(number: int, head: str, lines: Iterator[tuple[int, str]], limits: Limits) -> Iterator[Request]:
    for at, text in _chain([(number, head)], lines):
        if not text.strip():
            continue
        item = _loads(at, text)
        if not isinstance(item, dict):
            raise refuse(at, "each line must be a JSON object, with `messages` or `prompt`")
        yield _jsonl_request(at, item, limits)


def _chain(first: list[tuple[int, str]], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield from first
    yield from rest


def _jsonl_request(at: int, item: dict[str, Any], limits: Limits) -> Request:
    category = _category(at, item.get("category"))
    if "messages" in item:
        messages = _messages(at, item["messages"], "messages", limits)
        switches = _template_kwargs(at, item["chat_template_kwargs"]) if "chat_template_kwargs" in item else None
        return Request(at, category, messages=messages, max_tokens=_max_tokens(at, item, "max_tokens", limits),
                       chat_template_kwargs=switches)  # fmt: skip
    if "prompt" in item:
        prompt = _prompt(at, item["prompt"], "prompt", limits)
        return Request(at, category, prompt=prompt, max_tokens=_max_tokens(at, item, "output_tokens", limits))
    raise refuse(at, "the object has neither `messages` (a chat request) nor `prompt` (a vLLM custom dataset line)")


def _category(at: int, value: object) -> str:
    if value is None:
        return CUSTOM
    if not isinstance(value, str) or value not in KINDS:
        raise refuse(at, f"`category` must be one of {list(KINDS)}, not {str(value)[:40]!r}")
    return value


def _max_tokens(at: int, item: dict[str, Any], name: str, limits: Limits) -> int:
    value = item.get(name, limits.default_max_tokens)
    if type(value) is not int or not 1 <= value <= limits.max_output_tokens:
        raise refuse(at, f"`{name}` must be an integer from 1 to {limits.max_output_tokens}, not {str(value)[:40]!r}")
    return value


def _prompt(at: int, value: object, where: str, limits: Limits) -> str:
    if not isinstance(value, str):
        raise refuse(at, f"`{where}` is not a string")
    if not value.strip():
        raise refuse(at, f"`{where}` is empty")
    if len(value) > limits.max_prompt_chars:
        raise UserError(
            "workload:too-long", f"line {at}: `{where}` has {len(value):,} characters; the limit is {limits.max_prompt_chars:,}."
        )
    return value


def _messages(at: int, value: object, where: str, limits: Limits) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise refuse(at, f"`{where}` must be a non-empty list of messages")
    messages = []
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            raise refuse(at, f"`{where}[{index}]` is not an object with `role` and `content`")
        role = message.get("role")
        if role not in ROLES:
            raise refuse(at, f"`{where}[{index}].role` must be one of {list(ROLES)}, not {str(role)[:40]!r}")
        messages.append((str(role), _prompt(at, message.get("content"), f"{where}[{index}].content", limits)))
    if messages[-1][0] == "assistant":
        raise refuse(at, f"`{where}` ends with an assistant message; the request is what comes after the last user turn")
    return tuple(messages)


MAX_TEMPLATE_KWARGS = 16
IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")  # no leading underscore: never a dunder


def _template_kwargs(at: int, value: object) -> dict[str, TemplateValue] | None:
    """A chat request's `chat_template_kwargs` as vLLM's chat API takes them: the template's own switches, each a JSON
    scalar; never the messages or the special tokens, which the renderer sets."""
    where = "`chat_template_kwargs`"
    if not isinstance(value, dict) or len(value) > MAX_TEMPLATE_KWARGS:
        raise refuse(at, f"{where} must be an object of at most {MAX_TEMPLATE_KWARGS} switches")
    for name, setting in value.items():
        if not IDENTIFIER.fullmatch(name) or name in RENDERER_VARIABLES:
            raise refuse(at, f"{where} may not set {name[:40]!r}: a switch is a template variable's name, and the "
                             "renderer sets the messages and special tokens itself")  # fmt: skip
        if not isinstance(setting, bool | int | float | str | None) or (isinstance(setting, str) and len(setting) > 200):
            raise refuse(at, f"{where}.{name} must be true, false, a number, null or a string of at most 200 characters")
    return dict(value) or None


def _json_document(number: int, head: str, lines: Iterator[tuple[int, str]]) -> Any:
    """A whole-file JSON document (ShareGPT or a suite); its size is already bounded by the byte limit."""
    text = "\n".join([head, *(t for _, t in lines)])
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise refuse(number, "the JSON is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise refuse(number + exc.lineno - 1, f"not valid JSON ({exc.msg}, column {exc.colno})") from None
    except ValueError as exc:
        raise refuse(number, f"not valid JSON ({exc})") from None


def _records(number: int, head: str, lines: Iterator[tuple[int, str]], limits: Limits) -> Iterator[Request]:
    """SPEED-Bench records as JSONL, one a line; rows count the records, lines the file's lines."""
    row = 0
    for at, text in _chain([(number, head)], lines):
        if not text.strip():
            continue
        row += 1
        yield _record(at, row, _loads(at, text), limits)


def _record_list(document: list[Any], limits: Limits) -> Iterator[Request]:
    """SPEED-Bench records as one JSON list (item numbers count as lines and rows)."""
    for index, item in enumerate(document, start=1):
        yield _record(index, index, item, limits)


def _record(at: int, row: int, item: object, limits: Limits) -> Request:
    if not isinstance(item, dict) or not speed_bench.is_record(item):
        raise refuse(at, "each SPEED-Bench record must be an object with `question_id` and `turns` (or `messages`)")
    text, where = speed_bench.first_turn(at, row, item)
    messages: tuple[Message, ...] = (("user", _prompt(at, text, where, limits)),)
    return Request(at, _category(at, item.get("category")), messages=messages, max_tokens=limits.default_max_tokens)


def _sharegpt(document: list[Any], limits: Limits) -> Iterator[Request]:
    for index, item in enumerate(document, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("conversations"), list):
            raise refuse(index, "each ShareGPT item must be an object with a `conversations` list (item numbers count as lines)")
        turns = item["conversations"]
        last_human = max(
            (i for i, t in enumerate(turns) if isinstance(t, dict) and t.get("from") in ("human", "user")), default=-1
        )
        if last_human < 0:
            raise refuse(index, "`conversations` has no human turn to answer")
        messages = [_sharegpt_turn(index, i, turn) for i, turn in enumerate(turns[: last_human + 1])]
        category = _category(index, item.get("category"))
        yield Request(
            index, category, messages=_messages(index, messages, "conversations", limits), max_tokens=limits.default_max_tokens
        )


def _sharegpt_turn(index: int, position: int, turn: object) -> dict[str, object]:
    if not isinstance(turn, dict) or turn.get("from") not in SHAREGPT_ROLES:
        raise refuse(index, f"`conversations[{position}].from` must be one of {list(SHAREGPT_ROLES)}")
    return {"role": SHAREGPT_ROLES[str(turn["from"])], "content": turn.get("value")}


def _suite(document: Any, limits: Limits) -> Iterator[Request]:
    if not isinstance(document, dict) or not isinstance(document.get("categories"), dict):
        raise refuse(1, "a JSON object must be a SpecHub suite, with `categories`; for JSONL, put one request per line")
    max_tokens = _max_tokens(1, document, "max_tokens", limits)
    for category, prompts in document["categories"].items():
        kind = _category(1, category)
        if not isinstance(prompts, list):
            raise refuse(1, f"`categories.{kind}` is not a list of prompts")
        for index, prompt in enumerate(prompts):
            yield Request(1, kind, prompt=_prompt(1, prompt, f"categories.{kind}[{index}]", limits), max_tokens=max_tokens)


def _text(number: int, head: str, lines: Iterator[tuple[int, str]], limits: Limits) -> Iterator[Request]:
    for at, text in _chain([(number, head)], lines):
        if text.strip():
            yield Request(at, CUSTOM, prompt=_prompt(at, text, "the prompt", limits), max_tokens=limits.default_max_tokens)
