"""The submission form (signed-in users, the gate's verdict at once, quota) and the matrix page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from registry.models import Submission
from registry.runs.demo import demo_catalog_load
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db
ORG = "spechub-toy"


@pytest.fixture(autouse=True)
def hub(hub_settings):
    return hub_settings


@pytest.fixture
def alice() -> Client:
    client = Client()
    client.force_login(User.objects.create_user("alice"))
    return client


def submit(client: Client, repo_id: str, verifier: str = "") -> str:
    data = {"repo_id": repo_id, "revision": "main", "verifier_repo_id": verifier, "verifier_revision": "main"}
    return client.post("/submit/", data).content.decode()


def test_the_form_needs_a_signed_in_user():
    response = Client().get("/submit/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_broken_draft_shows_the_gates_reason_and_every_finding(alice):
    page = submit(alice, f"{ORG}/broken-tokenizer-shuffled", f"{ORG}/llama-verifier")
    assert "Refused by the compatibility gate" in page and "gate:tokenizer-content" in page
    assert "retrain with the verifier" in page  # the finding's hint
    assert "used 1 of 20" in page


def test_a_good_draft_is_queued_and_a_duplicate_points_to_its_pair(alice):
    page = submit(alice, f"{ORG}/eagle3-head")
    submission = Submission.objects.get()
    assert "queued for certification" in page and f'href="/runs/{submission.run_id}/"' in page
    again = submit(alice, f"{ORG}/eagle3-head")
    assert "Already in the catalog" in again and f'href="/pairs/{submission.pair_id}/"' in again


def test_a_missing_repo_is_explained(alice):
    page = submit(alice, f"{ORG}/no-such-draft", f"{ORG}/llama-verifier")
    assert "The Hub has no such repository" in page and "spechub-toy/no-such-draft" in page


def test_the_form_enforces_the_quota(alice, settings):
    settings.SPECHUB_SUBMISSION_RATE = "1/hour"
    submit(alice, f"{ORG}/broken-pickle-only", f"{ORG}/llama-verifier")
    page = submit(alice, f"{ORG}/broken-pickle-only", f"{ORG}/llama-verifier")
    assert "You have used your 1 submissions per hour" in page and Submission.objects.count() == 1


def test_the_matrix_page_has_a_cell_per_pair():
    pairs = demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")
    page = Client().get("/matrix/").content.decode()
    assert page.count("compatible, not certified") == len(pairs)
    assert f"{ORG}/llama-verifier" in page
