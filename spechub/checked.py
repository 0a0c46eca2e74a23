"""Hold a JSON answer to the spechub.shapes annotation it is read as, at run time.

The shapes are the one description of what the server answers (tests/test_client_shapes.py holds them to the server's
published schema); this reads them, so there is no second copy to keep in step. A key the shape names must be there
(unless NotRequired or in a total=False shape) and hold the type it says; keys the shape does not name are left alone,
so a newer server may add fields. `dict[str, object]` members are the server's free-form documents and are not walked.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Literal, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

QUOTED = 40  # characters of a wrong string an error quotes


class WrongShape(ValueError):
    """The answer is not what its shape says: `where` names the field (results[0].state), or '' for the whole."""

    def __init__(self, where: str, expected: str, found: object) -> None:
        super().__init__(f"{where or 'the answer'}: expected {expected}, got {described(found)}")
        self.where = where


def check(found: object, annotation: object, where: str = "") -> None:
    """Raise WrongShape naming the first field of `found` that is not what `annotation` says it is."""
    origin = get_origin(annotation)
    if annotation is object or annotation is Any:
        return
    if is_typeddict(annotation):
        _check_object(found, annotation, where)
    elif origin in (Union, types.UnionType):
        _check_union(found, get_args(annotation), where)
    elif origin is list:
        _check_list(found, get_args(annotation)[0], where)
    elif origin is dict:
        _check_mapping(found, get_args(annotation)[1], where)
    elif origin is Literal:
        if not any(found == allowed and type(found) is type(allowed) for allowed in get_args(annotation)):
            raise WrongShape(where, " or ".join(repr(allowed) for allowed in get_args(annotation)), found)
    elif not _is_scalar(found, annotation):
        raise WrongShape(where, expected(annotation), found)


def _check_object(found: object, shape: object, where: str) -> None:
    if not isinstance(found, dict):
        raise WrongShape(where, "a JSON object", found)
    for key, (annotation, required) in _members(shape).items():
        named = f"{where}.{key}" if where else key
        if key in found:
            check(found[key], annotation, named)
        elif required:
            raise WrongShape(named, expected(annotation), _MISSING)


def _check_union(found: object, options: tuple[object, ...], where: str) -> None:
    if found is None and type(None) in options:
        return
    wrong: list[WrongShape] = []
    for option in (option for option in options if option is not type(None)):
        try:
            check(found, option, where)
            return
        except WrongShape as refused:
            wrong.append(refused)
    # A wrong field deeper in the one shape it could be is the clearer error; else say every shape it could be.
    deeper = [refused for refused in wrong if refused.where != where]
    if len(wrong) == 1 and deeper:
        raise deeper[0]
    raise WrongShape(where, " or ".join(expected(option) for option in options), found)


def _check_list(found: object, item: object, where: str) -> None:
    if not isinstance(found, list):
        raise WrongShape(where, "a JSON list", found)
    for index, each in enumerate(found):
        check(each, item, f"{where}[{index}]")


def _check_mapping(found: object, value: object, where: str) -> None:
    if not isinstance(found, dict):
        raise WrongShape(where, "a JSON object", found)
    if value is object:  # a free-form document: the server's to shape
        return
    for key, each in found.items():
        check(each, value, f"{where}.{key}" if where else str(key))


def _is_scalar(found: object, annotation: object) -> bool:
    # bool is an int to Python, never a count or a figure to JSON's reader.
    if annotation is bool:
        return isinstance(found, bool)
    if annotation is int:
        return isinstance(found, int) and not isinstance(found, bool)
    if annotation is float:
        return isinstance(found, int | float) and not isinstance(found, bool)
    if annotation is type(None):
        return found is None
    return isinstance(annotation, type) and isinstance(found, annotation)


@functools.cache
def _members(shape: Any) -> dict[str, tuple[object, bool]]:
    """Each key's annotation and whether the key must be there. Read from the hints, not __required_keys__: with
    postponed annotations Python 3.11 counts a NotRequired key as required there."""
    hints, written = get_type_hints(shape), get_type_hints(shape, include_extras=True)
    total = bool(getattr(shape, "__total__", True))
    return {key: (hint, total and get_origin(written[key]) is not NotRequired) for key, hint in hints.items()}


class _Missing:
    pass


_MISSING = _Missing()
NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", type(None): "null"}


def expected(annotation: object) -> str:
    """What `annotation` asks for, in JSON's words."""
    for kind, name in NAMES.items():
        if annotation is kind:
            return name
    origin = get_origin(annotation)
    if is_typeddict(annotation) or origin is dict:
        return "a JSON object"
    if origin is list:
        return "a JSON list"
    if origin in (Union, types.UnionType):
        return " or ".join(expected(option) for option in get_args(annotation))
    if origin is Literal:
        return " or ".join(repr(allowed) for allowed in get_args(annotation))
    return "any value"


def described(found: object) -> str:
    """`found` in JSON's words, a string quoted short."""
    if isinstance(found, _Missing):
        return "nothing (the key is missing)"
    if isinstance(found, str):
        return f"the string {found[:QUOTED]!r}" + ("..." if len(found) > QUOTED else "")
    if isinstance(found, bool) or found is None:
        return {True: "true", False: "false", None: "null"}[found]
    if isinstance(found, int | float):
        return f"the number {found!r}"
    return "a JSON list" if isinstance(found, list) else "a JSON object" if isinstance(found, dict) else type(found).__name__
