"""Reading JSON that crossed a boundary against the types its readers are written for (issue 52 §1).

A document a worker or a user sends is stored once and read by every page and endpoint after. mypy holds our own
code to the TypedDicts; JSON from outside is held to them here, before it is kept, so that a reader never meets a
string where it does arithmetic or a list where it looks up a key. A mismatch names the field, as a path such as
`stages.throughput.levels.1.speedup_interval[0]`.

- `unstorable`: where a JSON value holds what no database or encoder takes back (NUL, half a surrogate pair, a
  number that overflowed to infinity);
- `mismatch`: where a JSON value first differs from a type hint (TypedDicts, lists, dicts, unions, literals, scalars),
  or from what the hint says the value means: `Annotated[float, Bounds(0, 1)]` holds a rate to [0, 1], and `rules`
  hold a TypedDict's fields to one another (an interval holds its point).
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, NotRequired, Required, Union

# NUL, which PostgreSQL keeps in no text or JSON column, and lone UTF-16 halves, which are no text at all (every
# read answered a UnicodeEncodeError): a JSON escape (\\u0000, \\ud800) makes either of them from valid UTF-8.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Numbers beyond 2**53 lose their digits as floats, and a product of two of them can overflow: none is a measurement.
LARGEST = 2**53
# A figure computed in floating point may land a rounding error past a bound it meets in exact arithmetic.
SLACK = 1e-9

Rule = Callable[[Mapping[str, Any], str], str | None]
"""What a TypedDict's fields must say of one another: given the object (its fields already typed) and its path, the
first thing wrong, as "x.y ..."; None when nothing is."""


class Meaning:
    """What a value means beyond its type, written beside it: `Annotated[float, Bounds(0, 1)]`.

    `mismatch` calls `problem` once the value has the annotated type (a number for a float, a list for a list), with
    the value's path; it returns what is wrong, naming the path ("x.y must be from 0 to 1, not 2.0"), or None.
    """

    def problem(self, value: Any, where: str) -> str | None:
        raise NotImplementedError


@dataclass(frozen=True)
class Bounds(Meaning):
    """A number from `low` to `high` (either open-ended where None); `above`: `low` itself is out."""

    low: float | None = None
    high: float | None = None
    above: bool = False

    def problem(self, value: Any, where: str) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None  # the type's to refuse, not the bounds'
        below = self.low is not None and (value <= self.low if self.above else value < self.low - SLACK)
        over = self.high is not None and value > self.high + SLACK
        return f"{where} must be {self}, not {_shown(value)}" if below or over else None

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"from {self.low:g} to {self.high:g}"
        if self.low is not None:
            return f"more than {self.low:g}" if self.above else f"{self.low:g} or more"
        return f"{self.high:g} or less"


@dataclass(frozen=True)
class LowHigh(Meaning):
    """An interval written [low, high]: two numbers, the low one first."""

    def problem(self, value: Any, where: str) -> str | None:
        if len(value) != 2:
            return f"{where} is an interval, [low, high]: two numbers, not {len(value)}"
        low, high = value
        if low > high + SLACK * max(1.0, abs(high)):
            return f"{where} is an interval, [low, high], but its low end {low!r} is above its high end {high!r}"
        return None


@dataclass(frozen=True)
class _Reading:
    partial: bool = False
    rules: Mapping[Any, Rule] = field(default_factory=dict)


def unstorable(value: object, where: str = "") -> str | None:
    """Where `value` holds text or a number no database or JSON encoder takes back, and what it is; None if nowhere."""
    for path, item in _walk(value, where):
        if isinstance(item, str) and (found := UNSTORABLE.search(item)):
            return f"{path or 'the body'} holds {_character(found.group())}"
        if isinstance(item, float) and not math.isfinite(item):
            return f"{path or 'the body'} holds a number too large to store ({item}); send a finite number"
    return None


def _walk(value: object, where: str) -> Iterator[tuple[str, object]]:
    """Every key and value under `value` with its path, iteratively: a body nests as deep as the parser let it."""
    stack: list[tuple[str, object]] = [(where, value)]
    while stack:
        path, item = stack.pop()
        yield path, item
        if isinstance(item, dict):
            for key, child in item.items():
                yield _at(path, key), key
                stack.append((_at(path, key), child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))


def _character(found: str) -> str:
    if found == "\x00":
        return "a NUL character (U+0000), which cannot be stored; remove it"
    return f"half of a UTF-16 surrogate pair (U+{ord(found):04X}), which is no text; send the whole pair or remove it"


def _at(path: str, key: object) -> str:
    shown = key.encode("unicode_escape").decode()[:60] if isinstance(key, str) else repr(key)
    return f"{path}.{shown}" if path else shown


def mismatch(
    value: object, hint: Any, where: str, *, partial: bool = False, rules: Mapping[Any, Rule] | None = None
) -> str | None:
    """Where `value` first differs from the type `hint`, and how ("x.y must be a number, not 'a'"); None when it reads
    as one. `partial`: a TypedDict's keys may be missing (a reader takes what is there); present keys are typed.
    `rules`: per TypedDict, what its fields must say of one another, read once they are typed."""
    return _read(value, hint, where, _Reading(partial, rules or {}))


def _read(value: object, hint: Any, where: str, reading: _Reading) -> str | None:
    origin = typing.get_origin(hint)
    if hint is Any or hint is object:
        return None
    if origin in (NotRequired, Required):
        return _read(value, typing.get_args(hint)[0], where, reading)
    if origin is Annotated:
        return _annotated(value, typing.get_args(hint), where, reading)
    if origin in (Union, types.UnionType):
        return _union(value, typing.get_args(hint), where, reading)
    if origin is Literal:
        allowed = typing.get_args(hint)
        return None if value in allowed else f"{where} must be one of {', '.join(map(repr, allowed))}, not {_shown(value)}"
    if typing.is_typeddict(hint):
        return _typeddict(value, hint, where, reading)
    if origin is list:
        return _list(value, typing.get_args(hint)[0], where, reading)
    if origin is dict:
        return _dict(value, typing.get_args(hint)[1], where, reading)
    return _scalar(value, hint, where)


def _annotated(value: object, args: tuple[Any, ...], where: str, reading: _Reading) -> str | None:
    if wrong := _read(value, args[0], where, reading):
        return wrong
    meanings = [meaning for meaning in args[1:] if isinstance(meaning, Meaning)]
    return next((wrong for meaning in meanings if (wrong := meaning.problem(value, where))), None)


def _union(value: object, members: tuple[Any, ...], where: str, reading: _Reading) -> str | None:
    if value is None and type(None) in members:
        return None
    present = [member for member in members if member is not type(None)]
    found = [_read(value, member, where, reading) for member in present]
    if None in found:
        return None
    # An object or a list wrong within, or a value of the right kind that means what it cannot: say where and how.
    if len(found) == 1 and (isinstance(value, dict | list) or _read(value, _bare(present[0]), where, _Reading()) is None):
        return found[0]
    return f"{where} must be {_named(members)}, not {_shown(value)}"


def _bare(hint: Any) -> Any:
    return typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint


def _typeddict(value: object, hint: Any, where: str, reading: _Reading) -> str | None:
    if not isinstance(value, dict):
        return f"{where} must be an object, not {_shown(value)}"
    fields = _fields(hint)
    if not reading.partial and (missing := [key for key, required in fields.items() if required and key not in value]):
        return f"{where or 'the document'} lacks {', '.join(missing)}"
    for key, (field_hint, _required) in _hints(hint).items():
        if key in value and (wrong := _read(value[key], field_hint, _at(where, key), reading)):
            return wrong
    rule = reading.rules.get(hint)
    return rule(value, where) if rule else None


def _fields(hint: Any) -> dict[str, bool]:
    return {key: required for key, (_field, required) in _hints(hint).items()}


@cache
def _hints(hint: Any) -> dict[str, tuple[Any, bool]]:
    """A TypedDict's fields, each with whether it must be there (NotRequired, or a total=False class, says not)."""
    found = typing.get_type_hints(hint, include_extras=True)
    total = bool(getattr(hint, "__total__", True))
    return {key: (annotation, typing.get_origin(annotation) is not NotRequired and total) for key, annotation in found.items()}


def _list(value: object, item: Any, where: str, reading: _Reading) -> str | None:
    if not isinstance(value, list):
        return f"{where} must be a list, not {_shown(value)}"
    return next((wrong for i, x in enumerate(value) if (wrong := _read(x, item, f"{where}[{i}]", reading))), None)


def _dict(value: object, item: Any, where: str, reading: _Reading) -> str | None:
    if not isinstance(value, Mapping):
        return f"{where} must be an object, not {_shown(value)}"
    return next((wrong for key, x in value.items() if (wrong := _read(x, item, _at(where, key), reading))), None)


def _scalar(value: object, hint: Any, where: str) -> str | None:
    if hint is float or hint is int:
        return _number(value, hint, where)
    if hint is type(None):
        return None if value is None else f"{where} must be null, not {_shown(value)}"
    if isinstance(hint, type) and not isinstance(value, hint):
        return f"{where} must be {_named((hint,))}, not {_shown(value)}"
    return None


def _number(value: object, hint: type, where: str) -> str | None:
    """A JSON number: never a bool (True reads as 1), finite, within ±2**53; an int where `hint` is int (3.0 is one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{where} must be {_named((hint,))}, not {_shown(value)}"
    if (isinstance(value, float) and not math.isfinite(value)) or abs(value) > LARGEST:
        return f"{where} must be a number within ±2**53, not {_shown(value)}"
    if hint is int and value != int(value):
        return f"{where} must be a whole number, not {value!r}"
    return None


def _named(members: tuple[Any, ...]) -> str:
    words = {int: "a whole number", float: "a number", str: "a string", bool: "true or false", type(None): "null"}
    members = tuple(_bare(member) for member in members)
    named = [words.get(member) or ("an object" if typing.is_typeddict(member) or typing.get_origin(member) is dict
                                   else "a list" if typing.get_origin(member) is list else str(member))
             for member in members]  # fmt: skip
    return " or ".join(dict.fromkeys(named))


def _shown(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:40]}…"
