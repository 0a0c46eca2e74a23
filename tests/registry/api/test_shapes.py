"""A serializer parametrised by a TypedDict (`serializers.Serializer[Row]`) publishes the keys its producers fill.

The TypedDict is what the code that builds the answer (or the webhook body) is type-checked against; the serializer is
what the OpenAPI schema is drawn from. DRF drops the parameter at run time, so the pairs are read from the source.
"""

from __future__ import annotations

import ast
import importlib
from typing import is_typeddict

import pytest

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
        if is_typeddict(shape):
            pairs.append((module, name, shape))
    return pairs


def test_the_scan_finds_the_serializers_it_holds_to_their_shapes():
    names = {name for _, name, _ in typed_pairs()}
    assert {"SpeedOut", "BestKOut", "VerdictOut", "CertifiedData", "DriftData", "SnapshotIn", "ControlOut"} <= names


@pytest.mark.parametrize(("module", "name", "shape"), typed_pairs(), ids=lambda value: getattr(value, "__name__", value))
def test_a_serializer_names_exactly_the_keys_of_the_typeddict_it_is_parametrised_by(module, name, shape):
    typed = set(shape.__required_keys__ | shape.__optional_keys__)
    published = set(getattr(importlib.import_module(module), name)().fields)
    assert typed == published, f"{shape.__name__} alone has {sorted(typed - published)}, {name} alone {sorted(published - typed)}"
