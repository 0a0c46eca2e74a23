"""Pagination that stays fast on deep pages of a large, joined listing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Model, QuerySet
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.views import APIView

from registry.params import whole_number


class PageNumbers(PageNumberPagination):
    """Page numbers parsed as every other count is: a full-width `page=1` or `page=²` is a 400 with the reason, not a 404."""

    def get_page_number(self, request: Request, paginator: Any) -> int | str:
        given = request.query_params.get(self.page_query_param)
        return "last" if given in self.last_page_strings else whole_number(given, name="page", high=10**9, default=1)


class IdsFirstPagination(PageNumbers):
    """Read the page's ids from the sort index alone, then fetch only those rows with their joins.

    With OFFSET, PostgreSQL otherwise joins every skipped row; here it skips bare index
    entries. Three queries per page (count, ids, rows), however deep the page.
    """

    def paginate_queryset(
        self, queryset: QuerySet[Any, Any] | Sequence[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        if not isinstance(queryset, QuerySet):
            return super().paginate_queryset(queryset, request, view)
        ids = super().paginate_queryset(queryset.values_list("pk", flat=True), request, view)
        if ids is None:
            return None
        # The ids already passed the filters: fetch by primary key alone, keeping the joins.
        fetch = queryset.model._default_manager.filter(pk__in=list(ids))
        fetch.query.select_related = queryset.query.select_related
        rows: dict[Any, Model] = {row.pk: row for row in fetch}
        return [rows[pk] for pk in ids if pk in rows]
