"""The API pair list's pages (issue 64): a count that stops at a cap and says so, pages in the sort's order whether
the matches are sorted in memory or read from the sort's index, and two queries a page either way."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from registry.catalog.api import PairListOut, PairOut, PairPages
from registry.catalog.selectors import pairs_listed
from registry.models import HubModel, Method, Pair
from tests.support.factories import HubModelFactory, PairFactory, RunFactory

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]
SPEEDUPS = [1.4, None, 0.8, 2.1, None, 1.4, 0.5]


@pytest.fixture
def pairs() -> list[Pair]:
    """Seven pairs, the newest last, two unmeasured and two equally fast; drafts org/find-0..3 and org/other-4..6."""
    made = []
    for n, speedup in enumerate(SPEEDUPS):
        draft = HubModelFactory.create(repo_id=f"org/{'find' if n < 4 else 'other'}-{n}")
        pair = PairFactory.create(draft=draft)
        Pair.objects.filter(pk=pair.pk).update(speedup=speedup)
        made.append(pair)
    return made


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PairPages, "page_size", 2)


def listed(query: dict[str, Any]) -> dict[str, Any]:
    response = APIClient().get("/api/v1/pairs/", query)
    assert response.status_code == 200, response.content
    answer: dict[str, Any] = response.json()
    return answer


def every_page(query: dict[str, Any]) -> list[int]:
    ids, page = [], 1
    while True:
        answer = listed({**query, "page": page})
        ids += [p["id"] for p in answer["results"]]
        if not answer["next"]:
            return ids
        page += 1


def fastest_first(pairs: list[Pair]) -> list[int]:
    measured = sorted((p for p, s in zip(pairs, SPEEDUPS, strict=True) if s is not None), key=lambda p: -p.pk)
    by_speed = sorted(measured, key=lambda p: -(SPEEDUPS[pairs.index(p)] or 0))  # stable: id descending among equals
    return [p.pk for p in by_speed] + [p.pk for p in reversed(pairs) if SPEEDUPS[pairs.index(p)] is None]


def test_a_count_under_the_cap_is_exact_and_the_pages_keep_the_sort(pairs, small_pages):
    answer = listed({"sort": "speedup"})
    assert (answer["count"], answer["count_exact"]) == (7, True)
    assert every_page({"sort": "speedup"}) == fastest_first(pairs)  # unmeasured last, ties newest first
    assert every_page({}) == [p.pk for p in reversed(pairs)]


def test_past_the_cap_the_count_is_a_lower_bound_and_the_pages_still_walk_the_sort(pairs, small_pages, monkeypatch):
    monkeypatch.setattr(PairPages, "count_cap", 3)
    first = listed({"sort": "speedup"})
    assert (first["count"], first["count_exact"]) == (3, False) and first["next"]
    assert every_page({"sort": "speedup"}) == fastest_first(pairs)
    deep = listed({"sort": "speedup", "page": 4})  # counted to the end of the asked page, and one row further
    assert (deep["count"], deep["count_exact"], deep["next"]) == (7, True, None)
    assert APIClient().get("/api/v1/pairs/", {"page": 5}).status_code == 404


def test_a_search_counts_and_sorts_in_one_pass_under_the_cap_and_past_it(pairs, small_pages, monkeypatch):
    found = listed({"q": "find", "sort": "speedup"})
    assert (found["count"], found["count_exact"]) == (4, True)
    assert every_page({"q": "find", "sort": "speedup"}) == [p for p in fastest_first(pairs) if p in {q.pk for q in pairs[:4]}]
    monkeypatch.setattr(PairPages, "count_cap", 2)
    capped = listed({"q": "org/", "sort": "speedup"})
    assert (capped["count"], capped["count_exact"]) == (3, False)  # the end of page 1, and one row further
    assert every_page({"q": "org/", "sort": "speedup"}) == fastest_first(pairs)


def test_the_last_page_counts_everything(pairs, small_pages, monkeypatch):
    monkeypatch.setattr(PairPages, "count_cap", 2)
    last = listed({"page": "last"})
    assert (last["count"], last["count_exact"], [p["id"] for p in last["results"]]) == (7, True, [pairs[0].pk])


@pytest.mark.parametrize("query", [{}, {"page": 3}, {"sort": "al", "verdict": ""}, {"q": "find"}, {"q": "org/"}])
@pytest.mark.parametrize("cap", [2, 10_000])
def test_every_page_is_two_queries_however_its_rows_are_found(
    pairs, small_pages, monkeypatch, query, cap, django_assert_num_queries
):
    monkeypatch.setattr(PairPages, "count_cap", cap)
    with django_assert_num_queries(2):
        APIClient().get("/api/v1/pairs/", query)


def test_the_list_writes_each_pair_as_drf_would(pairs):
    draft_free = PairFactory.create(draft=None, method=Method.NGRAM, options={"prompt_lookup_max": 4})
    run = RunFactory.create(pair=draft_free)
    Pair.objects.filter(pk=draft_free.pk).update(latest_run=run, regressed=True, verdict="certified", hardware="cpu")
    HubModel.objects.filter(pk=draft_free.verifier_id).update(parameter_count=7_000_000, family="llama")
    rows = list(pairs_listed())
    fast, drf = PairListOut(rows, many=True).data, PairOut(rows, many=True).data
    assert JSONRenderer().render(fast) == JSONRenderer().render(drf)
    assert list(fast[0]) == PairOut.Meta.fields
    written = next(row for row in fast if row["id"] == draft_free.pk)
    assert written["draft"] is None and written["latest_run"] == run.pk and written["verifier"]["parameter_count"] == 7_000_000
