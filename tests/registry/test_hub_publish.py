from __future__ import annotations

import pytest

from kernel import certificates
from registry.models import Certificate
from registry.services.certificates import signing_key
from registry.services.publishing import certificate_hub_pr_open
from tests.support.factories import PairFactory
from tests.support.hub_write_double import hub_write_double
from tests.support.runs import finish_run


@pytest.fixture
def certificate(db) -> Certificate:
    return finish_run(PairFactory.create(), verdict="certified").certificate


@pytest.mark.parametrize("publish", [False, True])
def test_a_hub_pr_is_queued_only_when_publishing_is_on(db, settings, django_capture_on_commit_callbacks, publish):
    if publish:
        settings.SPECHUB_HUB_PUBLISH = True
    else:
        assert settings.SPECHUB_HUB_PUBLISH is False  # the default
    with django_capture_on_commit_callbacks() as callbacks:
        finish_run(PairFactory.create())
    assert any("registry.publish_certificate_to_hub" in repr(callback) for callback in callbacks) is publish


def test_it_opens_a_pr_with_the_signed_certificate_against_a_hub_write_test_double(certificate, settings, monkeypatch):
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    with hub_write_double() as hub:
        settings.SPECHUB_HUB_ENDPOINT, settings.SPECHUB_HUB_TOKEN = hub.endpoint, "hf_test_write_token"
        url = certificate_hub_pr_open(certificate_id=certificate.pk)
        again = certificate_hub_pr_open(certificate_id=certificate.pk)

    draft = certificate.pair.draft
    assert url == again == f"{hub.endpoint}/{draft.repo_id}/discussions/1"
    (commit,) = hub.commits  # a second call does not open a second PR
    assert (commit.repo_id, commit.revision, commit.create_pr) == (draft.repo_id, "main", True)
    assert commit.authorization == "Bearer hf_test_write_token"
    assert "certified" in commit.header["summary"] and "verify_certificate" in commit.header["description"]
    published = commit.files[f"spechub/certificate-{certificate.run_id}.json"]
    assert certificates.verify(published, signing_key().public_key()).digest == certificate.digest
    certificate.refresh_from_db()
    assert certificate.hub_pr_url == url
