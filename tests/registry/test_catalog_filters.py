"""Catalog filters and sorts, on the page and in the API, over the listing a finished run updates."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from registry.models import Pair
from registry.runs.demo import demo_catalog_load
from tests.support.processes import ROOT
from tests.support.runs import finish_run

pytestmark = pytest.mark.django_db(transaction=True)


def finish(pair: Pair, verdict: str, speedup: float, al: float) -> None:
    finish_run(pair, verdict=verdict, speedup=speedup, al=al)


@pytest.fixture
def catalog(settings) -> dict[str, Pair]:
    settings.CELERY_TASK_ALWAYS_EAGER = False  # no worker: the runs are driven by hand
    pairs = {
        p.draft.repo_id.split("/")[1] if p.draft else p.method: p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")
    }
    finish(pairs["llama-draft-1l"], "certified", 1.3, 4.6)
    finish(pairs["eagle3-head"], "provisional", 1.5, 4.3)
    finish(pairs["ngram"], "certified", 0.9, 3.0)
    return pairs


def test_a_finished_run_updates_the_pairs_listing(catalog):
    pair = Pair.objects.get(pk=catalog["eagle3-head"].pk)
    assert (pair.verdict, pair.speedup, pair.mean_acceptance_length, pair.hardware, pair.engine_version) == (
        "provisional",
        1.5,
        4.3,
        "cpu",
        "0.32.0",
    )
    assert pair.latest_run is not None and pair.latest_run.engine_version == "0.32.0"


def test_the_api_filters_and_sorts_like_the_page(catalog):
    def drafts(**query: str) -> list[str]:
        return [
            p["draft"]["repo_id"] if p["draft"] else p["method"]
            for p in APIClient().get("/api/v1/pairs/", query).json()["results"]
        ]

    assert drafts(verdict="certified", sort="speedup") == ["spechub-toy/llama-draft-1l", "ngram"]
    assert drafts(min_speedup="1.2", sort="al") == ["spechub-toy/llama-draft-1l", "spechub-toy/eagle3-head"]
    assert drafts(method="eagle3", hardware="cpu") == ["spechub-toy/eagle3-head"]
    assert len(drafts(family="llama")) == 5 and drafts(family="mistral") == []
    assert sorted(drafts(family="gemma4")) == ["spechub-toy/gemma4-assistant", "spechub-toy/gemma4-eagle3-head"]
    assert drafts(family="qwen3") == ["spechub-toy/qwen3-eagle3-head"]  # each family's pair under its own (issue 60)
    assert drafts(family="gpt-oss") == ["spechub-toy/gpt-oss-eagle3-head"]
    speeds = [p["speedup"] for p in APIClient().get("/api/v1/pairs/", {"sort": "speedup"}).json()["results"]]
    assert speeds == [1.5, 1.3, 0.9] + [None] * 6  # unmeasured pairs sort last
    bad = APIClient().get("/api/v1/pairs/", {"verdict": "excellent"})
    assert bad.status_code == 400 and "verdict" in bad.json()["error"]["details"]


def test_the_page_applies_a_filter_and_explains_an_empty_result(catalog):
    page = Client().get("/", {"verdict": "certified", "sort": "speedup"}).content.decode()
    assert page.index("llama-draft-1l") < page.index(">ngram<") and "eagle3-head" not in page
    assert "0.32.0" in page and "verdict-certified" in page
    empty = Client().get("/", {"min_speedup": "9"}).content.decode()
    assert "No pair matches these filters" in empty


def test_the_family_filter_names_each_family_by_its_title_and_filters_by_its_code(catalog):
    page = Client().get("/", {"family": "gemma4"}).content.decode()
    assert '<option value="gemma4" selected>Gemma 4</option>' in page and '<option value="gpt-oss" >gpt-oss</option>' in page
    assert '<option value="llama" >Llama</option>' in page and '<option value="qwen3" >Qwen3</option>' in page
    assert "gemma4-eagle3-head" in page and "llama-draft-1l" not in page
