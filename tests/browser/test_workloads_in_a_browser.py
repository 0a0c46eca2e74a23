"""Your own traffic in chromium: upload, see the refusal that names the line, certify two drafts, read the comparison.

The certifications run through the real certify task with injected stages (test doubles for the engine figures);
the pages are screenshotted into var/screenshots/ and checked with axe-core at phone width.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from registry.models import CertificationRun, Workload
from registry.runs.submissions import submission_create
from registry.tasks.certify import certify
from tests.browser.test_pages_look_right import PASSWORD, look_at, screenshots, sign_in, sized  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)
ORG = "spechub-toy"


@pytest.fixture
def catalog(hub_settings: Any, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False  # no worker: the runs are certified by hand below
    settings.SPECHUB_SIGNING_KEY_FILE = tmp_path / "signing-key"
    monkeypatch.setenv("SPECHUB_WORKLOAD_DIR", str(tmp_path / "workloads"))
    alice = User.objects.create_user("alice", password=PASSWORD)
    for draft in ("llama-draft-1l", "eagle3-head"):
        submission_create(user=alice, repo_id=f"{ORG}/{draft}", verifier_repo_id=f"{ORG}/llama-verifier", certify=False)


def upload(page: Any, base: str, path: Path, name: str) -> None:
    page.goto(f"{base}/workloads/")
    page.fill("input[name=name]", name)
    page.set_input_files("input[name=file]", str(path))
    page.click("main form button[type=submit]")


@pytest.mark.parametrize("sized", ["phone"], indirect=True)
def test_upload_a_thousand_requests_certify_two_drafts_with_injected_stages_and_read_the_recommendation(
    sized: Any,  # noqa: F811 - the imported fixture
    catalog: None,
    live_server: Any,
    tmp_path: Path,
    screenshots: Path,  # noqa: F811
) -> None:
    page, base = sized, live_server.url
    sign_in(page, base)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"messages": [{"role": "user", "content": ["not", "a", "string"]}]}\n')
    upload(page, base, bad, "broken")
    assert "line 2: `messages[0].content` is not a string" in page.locator("[role=alert]").inner_text()
    assert not Workload.objects.exists()

    traffic = tmp_path / "traffic.jsonl"
    requests = [{"messages": [{"role": "user", "content": f"Is the tree {i % 250}?"}], "max_tokens": 16} for i in range(1000)]
    traffic.write_text("".join(json.dumps(r) + "\n" for r in requests))
    upload(page, base, traffic, "support chat")
    page.wait_for_url(f"{base}/workloads/*/")
    assert "200 of your 1,000 requests (250 distinct), seed 0" in page.locator("main .lead").inner_text()
    assert "Nothing measured on this workload yet" in page.content()

    page.check("input[name=pair][value=all]")
    with page.expect_navigation():
        page.click("main form button:text-is('Certify')")
    runs = list(CertificationRun.objects.filter(workload__isnull=False))
    assert len(runs) == 2
    with override_settings(SPECHUB_DIRECTOR_STAGES="tests.support.stages.injected_stages_on_a_workload"):
        for run in runs:
            assert certify.apply(args=(run.pk,)).result == "finished"

    page.goto(page.url.split("?")[0] + "?concurrency=1")
    assert "Use spechub-toy/llama-draft-1l." in page.locator(".recommendation").inner_text()
    assert "at concurrency 1 (the interval for 2 drafts at once)" in page.locator(".recommendation").inner_text()
    assert page.locator("select#c option").all_inner_texts() == ["1", "4"]  # measured levels only
    assert page.locator("table.comparison tbody tr").count() == 2
    assert page.locator("svg.chart[data-chart=workload-candidates] rect.hbar").count() == 2
    problems = look_at(page, "workload", "phone", screenshots)
    delete_asks_first(page, Workload.objects.get())
    page.goto(f"{base}/workloads/")
    problems += look_at(page, "workloads", "phone", screenshots)
    assert not problems, json.dumps(problems, indent=2)


def delete_asks_first(page: Any, workload: Workload) -> None:
    """The delete button asks before it removes the prompts (registry/static/registry/confirm.js: the
    Content-Security-Policy runs no inline onsubmit); declining leaves the workload as it was."""
    delete, asked = page.locator("main form button.danger"), []

    def decline(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", decline)
    delete.click()
    page.wait_for_timeout(300)  # a form that submitted anyway would have left the page by now
    workload.refresh_from_db()
    assert asked == ["Delete this workload's prompts? Its runs keep their figures."]
    assert workload.deleted_at is None
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        delete.click()
    workload.refresh_from_db()
    assert workload.deleted_at is not None
