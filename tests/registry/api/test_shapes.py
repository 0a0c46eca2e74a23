"""A serializer parametrised by a TypedDict or a dataclass (`serializers.Serializer[Row]`) publishes the keys its
producers fill, nullable and required as they write them.

The TypedDict is what the code that builds the answer (or the webhook body) is type-checked against; the serializer is
what the OpenAPI schema is drawn from. DRF drops the parameter at run time, so the pairs are read from the source.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from typing import Any, get_args, get_type_hints, is_typeddict

import pytest
from rest_framework import serializers
from rest_framework.fields import empty

from registry.api.shapes import required_keys
from tests.support.processes import ROOT


def parametrised_serializers() -> list[tuple[str, str, str]]:
    """(module, serializer class, its parameter's source) for every `class X(...Serializer[T])` in the registry."""
    found = []
    for path in sorted((ROOT / "registry").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found += [
                    (module, node.name, ast.unparse(base.slice))
                    for base in node.bases
                    if isinstance(base, ast.Subscript) and ast.unparse(base.value).endswith("Serializer")
                ]
    return found


SERIALIZERS = parametrised_serializers()


def typed_pairs() -> list[tuple[str, str, type]]:
    pairs = []
    for module, name, parameter in SERIALIZERS:
        shape = eval(parameter, vars(importlib.import_module(module)))  # noqa: S307  # our own source's annotation
        if is_typeddict(shape) or dataclasses.is_dataclass(shape):
            pairs.append((module, name, shape))
    return pairs


def required(shape: Any) -> set[str]:
    """A TypedDict's required keys; every field of a dataclass (an answer read from its attributes) is there."""
    return required_keys(shape) if is_typeddict(shape) else {field.name for field in dataclasses.fields(shape)}


def always_there(field: serializers.Field) -> bool:  # type: ignore[type-arg]
    """Whether the key is always in the serialized answer, or in the validated input (a default fills it in)."""
    return bool(field.required or field.default is not empty)


def test_the_scan_finds_the_serializers_it_holds_to_their_shapes():
    names = {name for _, name, _ in typed_pairs()}
    assert {
        "SpeedOut",
        "BestKOut",
        "VerdictOut",
        "CertifiedData",
        "DriftData",
        "SnapshotIn",
        "ControlOut",
        "IngestedOut",
    } <= names


@pytest.mark.parametrize(("module", "name", "shape"), typed_pairs(), ids=lambda value: getattr(value, "__name__", value))
def test_a_serializer_names_exactly_the_keys_of_the_typeddict_it_is_parametrised_by(module, name, shape):
    typed = set(get_type_hints(shape))
    published = set(getattr(importlib.import_module(module), name)().fields)
    assert typed == published, f"{shape.__name__} alone has {sorted(typed - published)}, {name} alone {sorted(published - typed)}"


@pytest.mark.parametrize(("module", "name", "shape"), typed_pairs(), ids=lambda value: getattr(value, "__name__", value))
def test_a_serializer_allows_a_null_or_an_absent_key_exactly_where_its_typeddict_does(module, name, shape):
    """The schema must not refuse a null the producer may write, nor demand a key it may leave out (a deployment's drift
    with no certified band sent a null the webhook schema forbade)."""
    fields = getattr(importlib.import_module(module), name)().fields
    present = required(shape)
    differ = [
        key
        for key, hint in get_type_hints(shape).items()
        if fields[key].allow_null != (type(None) in get_args(hint)) or always_there(fields[key]) != (key in present)
    ]
    assert differ == [], f"{name} and {shape.__name__} disagree on null or required at {differ}"
