"""Reading the registry's answers in `python -m workers serve`: each field checked, so a wrong shape is an error that
names the field, never a traceback; and the errors the worker stops on."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar, cast

import httpx

QUOTED = 60  # characters of a wrong value an error quotes
T = TypeVar("T")


class Refused(Exception):
    """The registry said no; its reason, as it gave it."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class Garbled(Refused):
    """The registry answered what this worker does not read (not JSON, a field of the wrong type, a name that would
    be a path outside its folder); the field is named, and nothing was written for it."""


def answered(answer: httpx.Response, asked: str) -> dict[str, Any]:
    """The answer's JSON object; Garbled when it is not JSON, or not an object."""
    try:
        found = answer.json()
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser's stack
        kind = answer.headers.get("Content-Type") or "no Content-Type"
        raise Garbled(f"{asked}: the registry answered HTTP {answer.status_code} with {kind}, not JSON; check that "
                      "--registry is the SpecHub registry's URL.") from None  # fmt: skip
    if not isinstance(found, dict):
        raise Garbled(f"{asked}: the registry answered {quoted(found)}, not the JSON object the worker API answers.")
    return found


def field(found: Mapping[str, Any], key: str, kind: type[T], asked: str) -> T:
    """`found[key]` when it is a `kind` (true is no integer here); Garbled naming the field otherwise."""
    value = found.get(key)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    said = quoted(value) if key in found else "nothing"
    raise Garbled(f"{asked}: the registry's `{key}` must be {_NAMES.get(kind, kind.__name__)}, got {said}.")


def named(found: Mapping[str, Any], key: str, pattern: re.Pattern[str], asked: str) -> str:
    """`found[key]`, a string that becomes a path here, when the whole of it matches `pattern`; Garbled otherwise."""
    value = field(found, key, str, asked)
    if not pattern.fullmatch(value):
        raise Garbled(f"{asked}: the registry's `{key}` {quoted(value)} is not a name this worker makes a path of; "
                      "nothing was written for it.")  # fmt: skip
    return value


def strings(found: Mapping[str, Any], key: str, asked: str) -> list[str]:
    values = field(found, key, list, asked)
    if not all(isinstance(value, str) for value in values):
        raise Garbled(f"{asked}: the registry's `{key}` must be a list of strings, got {quoted(values)}.")
    return cast(list[str], values)


_NAMES: dict[type, str] = {str: "a string", int: "an integer", dict: "a JSON object", list: "a JSON list"}


def quoted(value: object) -> str:
    text = json.dumps(value) if isinstance(value, str | int | float | bool | None) else type(value).__name__
    return text[:QUOTED] + ("..." if len(text) > QUOTED else "")


def number(found: Mapping[str, Any], key: str, asked: str) -> float:
    value = found.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:  # NaN is no setting
        return float(value)
    raise Garbled(f"{asked}: the registry's `{key}` must be a number, got {quoted(value) if key in found else 'nothing'}.")
