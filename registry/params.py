"""Whole numbers from query strings, forms and JSON bodies, parsed one way everywhere.

`str.isdigit()` is true for '²', which `int()` then refuses (a 500), and `int()` takes the full-width digit one as 1
and refuses 5,000 nines outright. An id or a count here is 1 to 18 ASCII digits, or a refusal that says what was wrong.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import BadRequest
from rest_framework import serializers

DIGITS = re.compile(r"[0-9]{1,18}")  # 18 digits: any id a 64-bit column holds, and no 5,000-digit int() to parse
ECHO_LIMIT = 100  # an error quotes at most this many characters of what was sent


def echo(value: object) -> str:
    """Return `value` quoted for an error message, cut short: a refusal never echoes a huge input back."""
    text = value if isinstance(value, str) else repr(value)
    return repr(text) if len(text) <= ECHO_LIMIT else f"{text[:ECHO_LIMIT]!r}… ({len(text)} characters)"


class BadParameter(BadRequest):
    """A query-string or form parameter that is not what it must be: a 400 with `reason` on pages and in the API."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name, self.reason = name, reason


def whole_number_or_none(given: object, *, low: int = 0, high: int = 10**18) -> int | None:
    """The whole number `given` spells (a JSON int, or ASCII digits) when it lies in [low, high], else None."""
    if isinstance(given, bool):
        return None
    if isinstance(given, int):
        value = given
    elif isinstance(given, str) and DIGITS.fullmatch(given):
        value = int(given)
    else:
        return None
    return value if low <= value <= high else None


def whole_number(given: str | None, *, name: str, low: int = 1, high: int = 10**18, default: int | None = None) -> int:
    """The parameter `name` as a whole number from `low` to `high`; absent or empty gives `default` (if there is one).

    Raise BadParameter, with what was sent (cut short) and what to send, for anything else."""
    if given in (None, "") and default is not None:
        return default
    value = whole_number_or_none(given, low=low, high=high)
    if value is None:
        raise BadParameter(name, f"{echo(given)} is not a whole number from {low} to {high}; send ASCII digits, e.g. {low}.")
    return value


class WholeNumberField(serializers.IntegerField):
    """An IntegerField that takes a JSON int or ASCII digits only: not a full-width digit, '1.0', '1e3', true or 5,000 digits."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int | str) or (isinstance(data, str) and not DIGITS.fullmatch(data)):
            self.fail("invalid")
        return super().to_internal_value(int(data))  # its min_value and max_value still apply
