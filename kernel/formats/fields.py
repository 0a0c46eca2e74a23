"""A config's fields read one by one, each with a type check; a missing or ill-typed field becomes a finding.

The format readers (parse.py) are built on it, as is the transformer shape every config declares (`Geometry`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kernel.formats.findings import Finding, error

SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id")


class Fields:
    """Reads typed fields from one JSON object and records why a read failed."""

    def __init__(self, document: Mapping[str, Any], path: str, problems: list[Finding], code: str) -> None:
        self.document, self.path, self.problems, self.code = document, path, problems, code
        self.read: set[str] = set()

    def _get(self, key: str, required: bool) -> Any:
        self.read.add(key)
        value = self.document.get(key)
        if value is None and required:
            missing = "gate:format-missing-key" if self.code == "gate:format-bad-value" else self.code
            self.problems.append(error(missing, f"{self.path}{key} is missing."))
        return value

    def _bad(self, key: str, expected: str, value: Any) -> None:
        shown = repr(value)[:60]
        self.problems.append(error(self.code, f"{self.path}{key} must be {expected}, not {shown}."))

    def integer(self, key: str, *, required: bool = False, minimum: int = 1) -> int | None:
        value = self._get(key, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < 2**31:
            self._bad(key, f"an integer ≥ {minimum}", value)
            return None
        return value

    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, str) or not value or len(value) > 300:
            self._bad(key, "a non-empty string", value)
            return None
        return value

    def flag(self, key: str) -> bool | None:
        value = self._get(key, False)
        if value is not None and not isinstance(value, bool):
            self._bad(key, "true or false", value)
            return None
        return value

    def texts(self, key: str, *, required: bool = False) -> tuple[str, ...] | None:
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or (required and not value):
            self._bad(key, "a non-empty list of strings" if required else "a list of strings", value)
            return None
        return tuple(value)

    def integers(self, key: str, *, required: bool = False) -> tuple[int, ...] | None:
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            self._bad(key, "a list of integers", value)
            return None
        return tuple(value)

    def mapping(self, key: str, *, required: bool = False) -> Fields | None:
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, dict):
            self._bad(key, "a JSON object", value)
            return None
        return Fields(value, f"{self.path}{key}.", self.problems, self.code)

    def token_ids(self) -> dict[str, tuple[int, ...] | None]:
        """Return bos/eos/pad ids as tuples (eos may be a list in real configs)."""
        found: dict[str, tuple[int, ...] | None] = {}
        for key in SPECIAL_IDS:
            value = self.document.get(key)
            found[key] = self.integers(key) if isinstance(value, list) else _one(self.integer(key, minimum=0))
        return found

    def unread(self) -> dict[str, object]:
        """Return the fields no reader asked for, bounded: they are echoed back in reports and the API."""
        unread = [(key, value) for key, value in self.document.items() if key not in self.read]
        return {brief(key): brief(value) for key, value in unread[:MAX_EXTRA_FIELDS]}


# What a report echoes of a config it does not understand: a few fields, each short.
MAX_EXTRA_FIELDS = 32
MAX_ECHO_CHARS = 200


def brief(value: object) -> Any:
    """Return `value` if it is short; else a shortened string or a description of its size."""
    if isinstance(value, str) and len(value) > MAX_ECHO_CHARS:
        return f"{value[:MAX_ECHO_CHARS]}… ({len(value)} characters)"
    if isinstance(value, dict | list) and (len(value) > 8 or len(json.dumps(value)) > MAX_ECHO_CHARS):
        return f"<{'object' if isinstance(value, dict) else 'array'} of {len(value)} items>"
    return value


def _one(value: int | None) -> tuple[int, ...] | None:
    return None if value is None else (value,)


@dataclass(frozen=True)
class Geometry:
    """The transformer shape a config declares."""

    model_type: str | None = None
    hidden_size: int | None = None
    num_layers: int | None = None
    vocab_size: int | None = None
    max_positions: int | None = None
    special_ids: dict[str, tuple[int, ...] | None] = field(default_factory=dict)


def read_geometry(fields: Fields, required: frozenset[str] = frozenset()) -> Geometry:
    return Geometry(
        model_type=fields.text("model_type"),
        hidden_size=fields.integer("hidden_size", required="hidden_size" in required),
        num_layers=fields.integer("num_hidden_layers", required="num_hidden_layers" in required),
        vocab_size=fields.integer("vocab_size", required="vocab_size" in required),
        max_positions=fields.integer("max_position_embeddings"),
        special_ids=fields.token_ids(),
    )
