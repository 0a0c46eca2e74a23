"""SPEED-Bench's record format: what one record asks, and the placeholder rows its public release ships.

A record is ``{"question_id", "category", "sub_category", "source", "src_id", "difficulty", "multiturn"}`` with either
``turns`` (a list of strings) or, once resolved, ``messages`` (role and content). Its category carries over as it is.

Only the first user turn is sent, as vLLM's `speed_bench` loader does, so that the figures sit beside those
`vllm bench serve --dataset-name speed_bench` gives; `FIRST_TURN_ONLY` says so wherever a report shows the workload.

Some rows of the public release hold a placeholder where the prompt would be: their text comes from a source whose
licence keeps it out of the dataset. Such a row is refused, naming it, and nothing of the upload is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel.errors import UserError

FORMAT = "speed-bench"
PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE"
FIRST_TURN_ONLY = (
    "Only the first user turn of each SPEED-Bench record was sent, as vLLM's speed_bench loader does; later turns of "
    "multi-turn records were not measured."
)


def is_record(item: object) -> bool:
    """A SPEED-Bench record: a question id and its turns (or resolved messages)."""
    return isinstance(item, Mapping) and "question_id" in item and ("turns" in item or "messages" in item)


def first_turn(at: int, row: int, record: Mapping[str, Any]) -> tuple[object, str]:
    """(the record's first user turn, unchecked; where it sits), refusing the dataset's placeholder by its row."""
    if "turns" in record:
        turns = record["turns"]
        if not isinstance(turns, list) or not turns:
            raise _refused(at, "`turns` must be a non-empty list of strings")
        text, where = turns[0], "turns[0]"
    else:
        text, where = _first_user_message(at, record["messages"])
    if isinstance(text, str) and text.lstrip().upper().startswith(PLACEHOLDER):
        raise UserError("workload:placeholder", _placeholder(at, row, record))
    return text, where


def _first_user_message(at: int, messages: object) -> tuple[object, str]:
    if not isinstance(messages, list):
        raise _refused(at, "`messages` must be a list of messages with `role` and `content`")
    for index, message in enumerate(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return message.get("content"), f"messages[{index}].content"
    raise _refused(at, "`messages` has no user turn to send")


def _placeholder(at: int, row: int, record: Mapping[str, Any]) -> str:
    named = ", ".join(
        f"{key} {str(record[key])[:60]!r}" for key in ("question_id", "source", "src_id") if record.get(key) is not None
    )
    return (
        f"line {at}: row {row} ({named}) holds SPEED-Bench's placeholder, not a prompt: its text must be fetched from "
        "its source first."
    )


def _refused(at: int, what: str) -> UserError:
    return UserError("workload:invalid", f"line {at}: {what}.")
