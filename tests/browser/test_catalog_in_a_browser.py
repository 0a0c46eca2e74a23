"""SpecHub in Debian's chromium: browse, filter, open a certified pair, see its charts, submit drafts."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from registry.models import Pair
from registry.runs.demo import demo_catalog_load
from tests.registry.test_catalog_filters import finish
from tests.support.processes import ROOT, certifying_worker_env, start_worker

pytestmark = pytest.mark.django_db(transaction=True)
ORG = "spechub-toy"


@pytest.fixture
def hub(hub_settings):
    return hub_settings


def sign_in(page: Any, base: str) -> None:
    User.objects.create_user("alice", password="correct horse battery")
    page.goto(f"{base}/accounts/login/?next=/submit/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "correct horse battery")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/submit/")


def test_browse_filter_and_open_a_certified_pair_with_its_charts_drawn(page, live_server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    pairs = {
        p.draft.repo_id.split("/")[1] if p.draft else p.method: p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")
    }
    document_pair: Pair = pairs["llama-draft-1l"]
    finish(document_pair, "certified", 1.3, 4.6)
    page.goto(live_server.url)
    assert page.locator("tbody tr").count() == 9  # four families' pairs (issue 60)
    page.select_option("select[name=verdict]", "certified")
    page.click("text=Apply")
    page.wait_for_url("**verdict=certified**")
    assert page.locator("tbody tr").count() == 1
    page.click(f"text={ORG}/llama-draft-1l")
    page.wait_for_selector("text=Verdict")
    assert page.locator(".verdict-certified").count() == 1
    assert "vllm serve" in page.locator("#recipe").inner_text()


def test_the_charts_of_a_measured_pair_are_drawn(page, live_server):
    from tests.registry.test_pair_and_run_pages import result_document
    from tests.support.factories import RunFactory

    pair = next(p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models") if p.method == "eagle3")
    RunFactory.create(pair=pair, state="finished", result=result_document(), finished_at=pair.created_at)
    page.goto(f"{live_server.url}/pairs/{pair.pk}/")
    charts = page.locator("svg.chart")
    assert charts.count() == 2
    for index in range(2):
        box = charts.nth(index).bounding_box()
        assert box and box["width"] > 100 and box["height"] > 50
    bar = page.locator("svg.chart rect.bar").first.bounding_box()
    assert bar and bar["height"] > 10  # a bar really has height on screen
    assert page.locator("svg.chart polyline.line").count() == 1


def test_submitting_a_broken_draft_shows_the_gates_reason(page, live_server, hub):
    sign_in(page, live_server.url)
    page.fill("input[name=repo_id]", f"{ORG}/broken-eagle3-hidden")
    page.fill("input[name=verifier_repo_id]", f"{ORG}/llama-verifier")
    page.click("text=Check and submit")
    verdict = page.locator("#gate-verdict")
    verdict.wait_for()
    assert "Refused by the compatibility gate" in verdict.inner_text()
    assert "gate:geometry-hidden-size" in verdict.inner_text()


def test_a_good_submission_is_followed_by_the_page_while_a_worker_runs_injected_stages(page, live_server, hub, tmp_path):
    # The worker's stages are injected and slow (a few seconds each), so the page shows the run before it ends;
    # what a real run draws is the next test's, from the session's shared certification.
    injected = {"SPECHUB_DIRECTOR_STAGES": "tests.support.stages.injected_slow_stages", "SPECHUB_TEST_SLOW_SECONDS": "6"}
    worker = start_worker("worker-cpu", tmp_path, **certifying_worker_env(hub.endpoint, tmp_path), **injected)
    try:
        sign_in(page, live_server.url)
        page.fill("input[name=repo_id]", f"{ORG}/llama-draft-1l")
        page.fill("input[name=verifier_repo_id]", f"{ORG}/llama-verifier")
        page.click("text=Check and submit")
        page.click("text=Follow run")
        seen = set()
        for _ in range(120):
            state = page.locator("[data-field=state]").inner_text()
            seen.add(state)
            if state == "finished":
                break
            page.wait_for_timeout(500)
        assert "finished" in seen, (seen, worker.output()[-3000:])
        assert seen - {"finished"}, "the page never showed the run before it finished"
    finally:
        worker.stop()


@pytest.mark.engine
def test_the_pair_page_of_the_shared_real_certification_draws_its_charts(page, live_server, certified_run):
    page.goto(f"{live_server.url}/pairs/{certified_run.pair_id}/")
    for chart in ("acceptance", "speedup"):  # and one per-workload chart for each figure the run measured
        assert page.locator(f"svg.chart[data-chart={chart}]").count() == 1
    assert page.locator(".verdict-" + certified_run.pair.verdict).count() >= 1
    assert "vllm serve spechub-toy/llama-verifier" in page.locator("#recipe").inner_text()
