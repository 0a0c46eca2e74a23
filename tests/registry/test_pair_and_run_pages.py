"""The pair page (verdict, recipe, charts with text equivalents, history) and the live run page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from registry.models import WorkloadResult
from registry.services.demo import demo_catalog_load
from registry.states import RunState
from tests.support.factories import RunFactory
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db


def result_document() -> dict[str, Any]:
    levels = {
        str(c): {
            "speedup": s,
            "speedup_interval": [s - 0.1, s + 0.1],
            "baseline": {"tokens_per_second": 100.0 * c},
            "speculative": {"tokens_per_second": 100.0 * c * s},
        }
        for c, s in ((1, 1.4), (2, 1.3), (4, 1.1), (8, 0.9), (16, 0.8))
    }
    greedy = {
        "chat": {"exact_match": 1.0, "divergences": []},
        "math": {"exact_match": 0.75, "divergences": [{"prompt": 2, "token": 7}]},
    }
    acceptance = {"mean_acceptance_length": 3.2, "acceptance_rate": 0.55, "per_position": [0.8, 0.6, 0.45, 0.35]}
    return {
        "schema_version": 2,
        "stages": {
            "speculative": {"acceptance": acceptance},
            "throughput": {"levels": levels, "break_even_concurrency": 6.3, "theoretical_bound": 3.2, "per_category_speedup": {}},
            "equivalence": {
                "greedy": greedy,
                "reference": {"chat": {"exact_match": 1.0}, "math": {"exact_match": 1.0}},
                "sampling": [{"p_value": 0.42, "samples": 600}],
            },
            "verdict": {
                "verdict": "failed",
                "reasons": ["greedy exact match 0.750 < 1.0"],
                "thresholds": {"greedy_exact_match": 1.0, "sampling_alpha": 0.001, "min_speedup": 1.0},
            },
        },
    }


@pytest.fixture
def certified_pair():
    pair = next(p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models") if p.method == "eagle3")
    run = RunFactory.create(
        pair=pair, state=RunState.FINISHED, finished_at=timezone.now(), result=result_document(), environment={"dtype": "float32"}
    )
    WorkloadResult.objects.create(
        run=run, category="math", mean_acceptance_length=3.1, acceptance_rate=0.5, greedy_exact_match=0.75, speedup=1.2
    )
    return pair, run


def test_the_catalog_links_each_pair_to_its_page(certified_pair):
    pair, _ = certified_pair
    assert f'href="/pairs/{pair.pk}/"' in Client().get("/").content.decode()


def test_the_pair_page_shows_verdict_recipe_charts_and_their_numbers(certified_pair):
    pair, run = certified_pair
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert "verdict-failed" in page and "greedy exact match 0.750" in page
    assert pair.compatibility["recipe"]["serve"].split(" --speculative-config")[0] in page
    assert 'class="copy"' in page and "copy.js" in page
    bars = re.findall(r'<rect class="bar"[^>]*height="([0-9.]+)"', page)
    assert len(bars) == 4 and [float(h) for h in bars] == sorted(
        (float(h) for h in bars), reverse=True
    )  # rates fall with position
    points = re.search(r'<polyline class="line speedup" points="([^"]+)"', page)
    assert points and len(points.group(1).split()) == 5
    assert 'class="break-even"' in page and "bound 3.20x" in page
    assert "0.350" in page and "6.3" in page  # the text equivalents carry the same numbers
    assert "2: 7" in page  # the divergence position
    assert f'href="/runs/{run.pk}/"' in page
    # c=1 and 2 clear 1, c=4 and 8 reach it, c=16 stays below: the table says what each interval supports.
    supported = re.findall(r'<span class="speed speed-[a-z-]+">([a-z ]+)</span>', page)
    assert supported == ["faster", "faster", "no measurable difference", "no measurable difference", "slower"]
    assert "measurably faster up to c=2, measurably slower from c=16" in page


def test_the_run_api_gives_each_levels_speedup_interval_and_what_it_supports(certified_pair):
    _, run = certified_pair
    speed = Client().get(f"/api/v1/runs/{run.pk}/").json()["speed"]
    supported = [(row["concurrency"], row["supports"]) for row in speed]
    assert supported[:3] == [(1, "faster"), (2, "faster"), (4, "no measurable difference")]
    assert speed[0]["interval"] == pytest.approx([1.3, 1.5]) and speed[0]["speedup"] == 1.4


def test_a_pair_without_runs_says_so(certified_pair):
    pair = next(p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models") if p.method == "ngram")
    page = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert "Not certified yet" in page and "No certification run yet." in page and "<svg" not in page


def test_the_run_page_shows_progress_and_on_failure_what_to_do(certified_pair):
    pair, _ = certified_pair
    running = RunFactory.create(pair=pair, state=RunState.MEASURING, stage="speculative", progress=57, attempts=1)
    page = Client().get(f"/runs/{running.pk}/").content.decode()
    assert 'value="57"' in page and "speculative" in page and 'data-final="false"' in page and "run.js" in page
    failed = RunFactory.create(
        pair=pair, state=RunState.FAILED_USER, error_code="gate:incompatible", error_message="gate:mapping-t2d: bad"
    )
    page = Client().get(f"/runs/{failed.pk}/").content.decode()
    assert "gate:incompatible" in page and "What to do: Fix what each finding names" in page and 'data-final="true"' in page


def test_unknown_pages_are_404():
    assert Client().get("/pairs/999999/").status_code == 404
    assert Client().get("/runs/999999/").status_code == 404


def test_the_queue_lists_runs_still_going_first(certified_pair):
    pair, _ = certified_pair
    going = RunFactory.create(pair=pair, state=RunState.QUEUED)
    newer = RunFactory.create(pair=pair, state=RunState.FINISHED)
    page = Client().get("/runs/").content.decode()
    assert page.index(f"#{going.pk}<") < page.index(f"#{newer.pk}<")


def test_the_queue_says_when_it_is_empty():
    assert "No certification has been queued yet" in Client().get("/runs/").content.decode()


def test_the_run_api_gives_state_progress_and_the_verdict(certified_pair):
    from rest_framework.test import APIClient

    _, run = certified_pair
    body = APIClient().get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["state"], body["verdict"]["verdict"]) == ("finished", "failed")
    assert [r["category"] for r in body["results"]] == ["math"]
