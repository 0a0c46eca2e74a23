"""The catalog's filters and sorts, shared by the web page and the API pair list."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import F, QuerySet

from registry.models import Method, Pair, Verdict

SORTS = {
    "newest": [F("created_at").desc(), F("id").desc()],
    "speedup": [F("speedup").desc(nulls_last=True), F("id").desc()],
    "al": [F("mean_acceptance_length").desc(nulls_last=True), F("id").desc()],
}


class PairFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="filter_search", max_length=200, label="Search")
    family = django_filters.CharFilter(field_name="verifier__family", lookup_expr="iexact", label="Verifier family")
    verifier = django_filters.CharFilter(field_name="verifier__repo_id", label="Verifier")
    method = django_filters.ChoiceFilter(choices=Method.choices, label="Algorithm")
    verdict = django_filters.ChoiceFilter(choices=Verdict.choices, label="Certification")
    hardware = django_filters.CharFilter(label="Hardware class")
    engine_version = django_filters.CharFilter(label="Engine version")
    min_speedup = django_filters.NumberFilter(field_name="speedup", lookup_expr="gte", label="Minimum speedup")
    sort = django_filters.ChoiceFilter(
        choices=[(key, key) for key in SORTS], method="filter_sort", label="Sort", empty_label="newest"
    )

    class Meta:
        model = Pair
        fields: list[str] = []

    def filter_search(self, queryset: QuerySet[Pair], name: str, value: str) -> QuerySet[Pair]:
        return queryset.filter(
            search__contains=value.upper()
        )  # one trigram index (migration 0015); the family has its own filter

    def filter_sort(self, queryset: QuerySet[Pair], name: str, value: str) -> QuerySet[Pair]:
        return queryset.order_by(*SORTS.get(value, SORTS["newest"]))


def filtered_pairs(params: Any, queryset: QuerySet[Pair]) -> tuple[PairFilter, QuerySet[Pair]]:
    """Return the bound filter (for the form and its errors) and the pairs it selects."""
    bound = PairFilter(params, queryset=queryset)
    return bound, bound.qs if bound.is_valid() else queryset.none()
