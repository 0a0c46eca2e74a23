from __future__ import annotations

import pytest

from tests.support.factories import HubModelFactory, PairFactory

pytestmark = pytest.mark.django_db


def test_an_empty_catalog_says_so_and_how_pairs_arrive(client):
    page = client.get("/").content.decode()
    assert "The catalog is empty" in page


def test_the_catalog_lists_pairs_with_their_pinned_shas(client):
    draft = HubModelFactory.create(repo_id="acme/listed-draft")
    pair = PairFactory.create(draft=draft)
    page = client.get("/").content.decode()
    assert draft.repo_id in page and pair.verifier.sha[:12] in page


def test_search_filters_by_repo_id_and_explains_no_match(client):
    PairFactory.create(draft=HubModelFactory.create(repo_id="acme/eagle-head"))
    PairFactory.create(draft=HubModelFactory.create(repo_id="other/draft"))
    page = client.get("/", {"q": "eagle"}).content.decode()
    assert "acme/eagle-head" in page and "other/draft" not in page
    assert "No pair matches" in client.get("/", {"q": "<script>"}).content.decode()
    assert "<script>" not in client.get("/", {"q": "<script>"}).content.decode()


def test_the_catalog_paginates(client):
    verifier = HubModelFactory.create(role="verifier")
    for k in range(1, 28):
        PairFactory.create(verifier=verifier, num_speculative_tokens=k)
    first = client.get("/").content.decode()
    second = client.get("/", {"page": 2}).content.decode()
    assert "page 1 of 2 (27 pairs)" in first and "next" in first
    assert "page 2 of 2" in second and first.count("<tr>") - 1 == 25 and second.count("<tr>") - 1 == 2
