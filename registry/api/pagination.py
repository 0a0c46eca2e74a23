"""Pagination that stays fast on deep pages of a large, joined listing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.paginator import InvalidPage, Page
from django.core.paginator import Paginator as DjangoPaginator
from django.db import connections
from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils.functional import cached_property
from rest_framework.exceptions import NotFound
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from registry.params import whole_number


class PageNumbers(PageNumberPagination):
    """Page numbers parsed as every other count is: a full-width `page=1` or `page=²` is a 400 with the reason, not a 404."""

    def get_page_number(self, request: Request, paginator: Any) -> int | str:
        given = request.query_params.get(self.page_query_param)
        return "last" if given in self.last_page_strings else whole_number(given, name="page", high=10**9, default=1)


class CountedPaginator(DjangoPaginator[Any]):
    """Page numbers and links over a count already made; it reads no rows itself."""

    def __init__(self, counted: int, per_page: int) -> None:
        super().__init__([], per_page)
        self.counted = counted

    @cached_property
    def count(self) -> int:
        return self.counted


class IdsFirstPagination(PageNumbers):
    """Two queries per page, however deep and however many rows match: a count that stops at `count_cap`, then the
    page's rows by primary key, with their joins.

    An exact count of a million pairs reads a million index entries (40-80 ms). This one stops at `count_cap` matches
    (or at the end of the asked page, if deeper); past it the answer says `"count_exact": false` and `count` is a
    lower bound, while `next` and `previous` stay exact. `page=last` alone counts everything, as it must to know
    where the end is.

    The count reads matches in whatever order the filters' own indexes give. Past the cap, the page's ids come from
    walking the sort's index, quick when matches are that many. Under it, the matches are sorted in memory: walking
    the index for a few thousand of them can pass a million rows (a search whose matches are all old). With a
    `one_pass_params` filter the count and the sort are one query: the first `count_cap` matches in the sort's order,
    counted and paged, by whichever plan PostgreSQL finds cheaper. The rows are then read by those ids in a subquery:
    with a plain OFFSET, PostgreSQL would join every skipped row.
    """

    count_cap = 10_000
    # Query parameters whose filters leave few matches, anywhere in the sort order, and whose index cannot count them
    # without reading each (a substring search): with one given, the count and the sort are one pass instead of two.
    one_pass_params: tuple[str, ...] = ()

    def paginate_queryset(
        self, queryset: QuerySet[Any, Any] | Sequence[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        size = self.get_page_size(request)
        if not isinstance(queryset, QuerySet) or not size:
            return super().paginate_queryset(queryset, request, view)
        self.request = request
        number = self._page_number(queryset, request, size)
        offset, limit = (number - 1) * size, max(self.count_cap, number * size + 1)  # enough to know if a page follows
        if any(request.query_params.get(name) for name in self.one_pass_params):
            counted, sorted_ids = _count_and_sort(queryset, limit=limit, offset=offset, size=size)
        else:
            counted, sorted_ids = queryset.values("pk").order_by()[:limit].count(), None  # unordered: filters' index only
        paginator = CountedPaginator(counted, size)
        try:
            paginator.validate_number(number)
        except InvalidPage as exc:
            raise NotFound(self.invalid_page_message.format(page_number=number, message=str(exc))) from exc
        self.counted, self.count_exact = counted, counted < limit
        ids = _page_ids(queryset, sorted_ids, few=counted < self.count_cap, offset=offset, size=size)
        self.page = Page(_rows(queryset, ids), number, paginator)
        self.display_page_controls = paginator.num_pages > 1 and self.template is not None
        return list(self.page)

    def _page_number(self, queryset: QuerySet[Any, Any], request: Request, size: int) -> int:
        number = self.get_page_number(request, None)
        if number in self.last_page_strings:
            return max(1, -(-queryset.count() // size))
        return int(number)

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "count": self.counted,
                "count_exact": self.count_exact,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paginated = super().get_paginated_response_schema(schema)
        paginated["required"].append("count_exact")
        paginated["properties"]["count_exact"] = {
            "type": "boolean",
            "description": f"False when the listing stopped counting at {self.count_cap:,} matches (or at the end of "
            "the asked page, if deeper): `count` is then a lower bound. `next` and `previous` are always exact.",
        }
        return paginated


def _page_ids(queryset: QuerySet[Any, Any], sorted_ids: list[Any] | None, *, few: bool, offset: int, size: int) -> Any:
    """The page's ids: the list one pass found, or a subquery that finds them (ranking every match when they are few,
    walking the sort's index otherwise)."""
    if sorted_ids is not None:
        return sorted_ids
    if not few:
        return queryset.values("pk")[offset : offset + size]
    ranked = _ranked(queryset).filter(listing_position__gt=offset, listing_position__lte=offset + size)
    return ranked.values("pk")[:size]  # a LIMIT the planner reads: otherwise it expects a third of the matches back


def _count_and_sort(queryset: QuerySet[Any, Any], *, limit: int, offset: int, size: int) -> tuple[int, list[Any]]:
    """Return how many of the first `limit` matches in the sort's order there are, and the ids at `offset` among them.

    The query has no LIMIT of its own, so PostgreSQL plans those matches as read to the end, as they are: under the
    page's small LIMIT it would walk the sort's index, past every row that does not match. Django cannot select from
    a subquery, hence the SQL around the one it compiles."""
    connection = connections[queryset.db]
    first = _ranked(queryset).values("listing_position", listing_pk=F("pk"))[:limit]
    inner, params = first.query.get_compiler(connection=connection).as_sql()
    pk, position, total = (connection.ops.quote_name(name) for name in ("listing_pk", "listing_position", "listing_total"))
    sql = (
        f"SELECT {pk}, {total} FROM (SELECT {pk}, {position}, COUNT(*) OVER () AS {total} FROM ({inner}) AS matches) "  # noqa: S608 - Django compiled it
        f"AS counted WHERE {position} > %s AND {position} <= %s ORDER BY {position}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, offset, offset + size])
        found = cursor.fetchall()
    return (found[0][1] if found else 0), [pk for pk, _ in found]


def _ranked(queryset: QuerySet[Any, Any]) -> QuerySet[Any, Any]:
    """The matches, each with its position in the sort's order."""
    ranked: QuerySet[Any, Any] = queryset.annotate(listing_position=Window(RowNumber(), order_by=_ordering(queryset)))
    return ranked


def _ordering(queryset: QuerySet[Any, Any]) -> list[Any]:
    return list(queryset.query.order_by or (queryset.model._meta.ordering if queryset.query.default_ordering else ()))


def _rows(queryset: QuerySet[Any, Any], ids: Any) -> list[Any]:
    """The rows with these ids (a list, or a subquery that gives them), with the queryset's joins and in its order."""
    fetch = queryset.model._default_manager.filter(pk__in=ids)  # they passed the filters: no need to apply them again
    fetch.query.select_related, fetch.query.deferred_loading = queryset.query.select_related, queryset.query.deferred_loading
    return list(fetch.order_by(*_ordering(queryset)))
