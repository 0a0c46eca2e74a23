"""OpenAPI schemas read from the kernel's and the selectors' TypedDicts, for answers that are not a model's, and the
schema's nulls written the OpenAPI 3.1 way.

`shape(Row)` gives an answer's schema from the TypedDict its code is type-checked against, so the published schema
names the answer's keys instead of "any object", and the TypedDict stays the one place they are written. It resolves
TypedDicts itself rather than through drf-spectacular, which reads `__required_keys__`: under `from __future__ import
annotations`, Python 3.11 counts a `NotRequired[...]` key as required there, and the schema would demand keys the
server leaves out. Leaves (str, int, Literal, ...) are drf-spectacular's.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, NotRequired, Required, Union, get_args, get_origin, get_type_hints, is_typeddict

from drf_spectacular.plumbing import append_meta, build_array_type, build_object_type, get_doc, resolve_type_hint
from drf_spectacular.types import PYTHON_TYPE_MAPPING, OpenApiTypes
from rest_framework.serializers import BaseSerializer

# A member typed `object` holds any JSON value (a stored document's section passed through as it is): the schema
# says "any", as it does for `Any`. drf-spectacular's own table has no entry for `object`, and refuses it without one.
PYTHON_TYPE_MAPPING.setdefault(object, OpenApiTypes.ANY)  # type: ignore[arg-type]  # its hint lists the types it knows


def shape(hint: object) -> dict[str, object]:
    """The OpenAPI schema of a type hint: a TypedDict, or a list, mapping or union holding them. A member that holds a
    serializer's output says so, `Annotated[dict[str, object], WorkloadOut]`, and the schema names that component."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated and isinstance(args[1], type) and issubclass(args[1], BaseSerializer):
        return {"$ref": f"#/components/schemas/{args[1].__name__}"}  # drf-spectacular names a component by its class
    if origin is Annotated:  # what a figure may be (kernel/result/figures.py): the schema gives its type
        return shape(args[0])
    if is_typeddict(hint):
        return _typeddict(hint)
    if origin is list:
        return build_array_type(shape(args[0]))
    if origin is dict and args[1] not in (Any, object):
        return build_object_type(additionalProperties=shape(args[1]))
    if origin in (Union, types.UnionType):
        present = [arg for arg in args if arg is not type(None)]
        schema: dict[str, object] = shape(present[0]) if len(present) == 1 else {"oneOf": [shape(arg) for arg in present]}
        return {**schema, "nullable": True} if len(present) < len(args) else schema
    found: dict[str, object] = resolve_type_hint(hint)  # type: ignore[no-untyped-call]  # drf-spectacular ships no hints here
    return found


def required_keys(typed: Any) -> set[str]:
    """The keys a TypedDict requires, `NotRequired[...]` and `Required[...]` read as written."""
    hints = get_type_hints(typed, include_extras=True)
    return {
        key
        for key, hint in hints.items()
        if get_origin(hint) is Required or (get_origin(hint) is not NotRequired and key in typed.__required_keys__)
    }


def _typeddict(typed: Any) -> dict[str, object]:
    hints = get_type_hints(typed, include_extras=True)
    properties = {key: shape(_bare(hint)) for key, hint in hints.items()}
    return build_object_type(properties=properties, required=required_keys(typed), description=get_doc(typed))


def _bare(hint: object) -> object:
    return get_args(hint)[0] if get_origin(hint) in (Required, NotRequired) else hint


def nulls_as_3_1(result: dict[str, object], **_: object) -> dict[str, object]:
    """A postprocessing hook: rewrite each OpenAPI 3.0 `nullable: true` left in the schema as 3.1 says a null is
    allowed (`type: [..., "null"]`), which 3.1 validators read; they ignore `nullable`, and so refused the nulls the
    server sends. drf-spectacular rewrites its serializer fields itself, but not the schemas type hints give
    (`shape`) nor DRF's pagination envelope; its own `append_meta` does the rewriting here."""
    return {key: _rewritten(value) for key, value in result.items()}


def _rewritten(node: object) -> object:
    if isinstance(node, list):
        return [_rewritten(item) for item in node]
    if not isinstance(node, dict):
        return node
    found = {key: _rewritten(value) for key, value in node.items()}
    return append_meta(found, {}) if found.get("nullable") is True else found
