"""OpenAPI schemas read from the kernel's and the selectors' TypedDicts, for answers that are not a model's, and the
schema's nulls written the OpenAPI 3.1 way.

drf-spectacular resolves a TypedDict inside a type hint (`list[Row]`) but not one given alone as a response, so
`shape(Row)` hands it the same schema, built the same way, as a raw schema: the published schema then says the
answer's keys and their types instead of "any object", and the TypedDict stays the one place they are written.
"""

from __future__ import annotations

from drf_spectacular.plumbing import append_meta, resolve_type_hint
from drf_spectacular.types import PYTHON_TYPE_MAPPING, OpenApiTypes

# A member typed `object` holds any JSON value (a stored document's section passed through as it is): the schema
# says "any", as it does for `Any`. drf-spectacular's own table has no entry for `object`, and refuses it without one.
PYTHON_TYPE_MAPPING.setdefault(object, OpenApiTypes.ANY)  # type: ignore[arg-type]  # its hint lists the types it knows


def shape(hint: object) -> dict[str, object]:
    """The OpenAPI schema of a type hint: a TypedDict, or a list or union of them."""
    schema: dict[str, object] = resolve_type_hint(hint)  # type: ignore[no-untyped-call]  # drf-spectacular ships no hints here
    return schema


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
