"""OpenAPI schemas read from the kernel's and the selectors' TypedDicts, for answers that are not a model's.

drf-spectacular resolves a TypedDict inside a type hint (`list[Row]`) but not one given alone as a response, so
`shape(Row)` hands it the same schema, built the same way, as a raw schema: the published schema then says the
answer's keys and their types instead of "any object", and the TypedDict stays the one place they are written.
"""

from __future__ import annotations

from drf_spectacular.plumbing import resolve_type_hint
from drf_spectacular.types import PYTHON_TYPE_MAPPING, OpenApiTypes

# A member typed `object` holds any JSON value (a stored document's section passed through as it is): the schema
# says "any", as it does for `Any`. drf-spectacular's own table has no entry for `object`, and refuses it without one.
PYTHON_TYPE_MAPPING.setdefault(object, OpenApiTypes.ANY)  # type: ignore[arg-type]  # its hint lists the types it knows


def shape(hint: object) -> dict[str, object]:
    """The OpenAPI schema of a type hint: a TypedDict, or a list or union of them."""
    schema: dict[str, object] = resolve_type_hint(hint)  # type: ignore[no-untyped-call]  # drf-spectacular ships no hints here
    return schema
