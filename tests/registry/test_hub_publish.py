from __future__ import annotations

import pytest
import yaml
from huggingface_hub import parse_eval_result_entries

from kernel import certificates
from registry.certificates.publishing import certificate_hub_pr_open
from registry.certificates.services import signing_key
from registry.models import Certificate
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
    assert "certified" in commit.header["summary"] and "spechub verify" in commit.header["description"]
    assert "## Speculative decoding, certified by SpecHub" in commit.header["description"]  # the model-card section
    published = commit.files[f"spechub/certificate-{certificate.run_id}.json"]
    assert certificates.verify(published, signing_key().public_key()).digest == certificate.digest
    # The figures in the Hub's own eval-results format, read back with huggingface_hub's parser.
    (path,) = [p for p in commit.files if p.startswith(".eval_results/")]
    entries = parse_eval_result_entries(yaml.safe_load(commit.files[path]))
    assert {e.task_id: e.value for e in entries}["acceptance_length"] == 3.0
    assert all(
        e.dataset_id.startswith("spechub/") and str(e.source_url).endswith(f"/pairs/{certificate.pair_id}/") for e in entries
    )
    assert certificate.pair.verifier.repo_id in str(entries[0].notes) and "cpu" in str(entries[0].notes)
    certificate.refresh_from_db()
    assert certificate.hub_pr_url == url
