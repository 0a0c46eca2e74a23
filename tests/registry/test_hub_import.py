"""A catalog that fills itself: drafts imported from a Hub collection (a loopback test double of the listing)
and read through olah (the real huggingface_hub client), each new commit gated once."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client, override_settings
from django_celery_beat.models import PeriodicTask

from registry.catalog.imports import collection_repo_ids, hub_import
from registry.models import CertificationRun, Pair, Submission
from registry.runs.schedules import schedules_install
from tests.support.collection_double import collection_double
from zoo import ORG

pytestmark = pytest.mark.django_db
SLUG = "spechub-toy/speculators-0123456789abcdef"
VERIFIER = f"{ORG}/llama-verifier"
DRAFTS = [f"{ORG}/eagle3-head", f"{ORG}/broken-pickle-only", f"{ORG}/llama-draft-1l"]


def test_a_collection_lists_its_models_in_order_and_leaves_papers_out_with_the_test_double():
    with collection_double(SLUG, DRAFTS) as endpoint:
        assert collection_repo_ids(slug=SLUG, endpoint=endpoint) == DRAFTS


def test_an_import_gates_each_new_commit_once_lists_passing_pairs_and_keeps_the_findings(hub_settings):
    with collection_double(SLUG, DRAFTS) as endpoint:
        found = hub_import(repo_ids=collection_repo_ids(slug=SLUG, endpoint=endpoint), verifier=VERIFIER)
    outcomes = {f.repo_id: f.outcome for f in found}
    assert outcomes == dict.fromkeys(DRAFTS, "gated")
    assert "gate-passed, not yet measured" in found[0].detail and "gate:safety-no-safetensors" in found[1].detail
    assert Pair.objects.count() == 2 and not CertificationRun.objects.exists()  # listed, not queued: the default policy
    again = hub_import(repo_ids=DRAFTS, verifier=VERIFIER)
    assert [f.outcome for f in again] == ["known"] * 3 and Submission.objects.count() == 3
    catalog = Client().get("/").content.decode()
    assert catalog.count("gate-passed, not yet measured") == 2
    imports = Client().get("/imports/").content.decode()
    assert "gate:safety-no-safetensors" in imports and f"{ORG}/broken-pickle-only" in imports


def test_the_certify_policy_queues_each_new_gate_passing_pair(hub_settings):
    found = hub_import(repo_ids=[f"{ORG}/eagle3-head"], certify=True)  # a speculators head names its verifier
    assert "queued for certification" in found[0].detail
    assert CertificationRun.objects.filter(pair__draft__repo_id=f"{ORG}/eagle3-head").count() == 1


def test_hostile_or_missing_repos_fail_alone_and_store_nothing(hub_settings):
    found = hub_import(repo_ids=["../../etc/passwd", f"{ORG}/no-such-repo", f"{ORG}/eagle3-head"])
    assert [f.outcome for f in found] == ["failed", "failed", "gated"]
    assert "hub:not-found" in found[1].detail and Submission.objects.count() == 1


def test_the_schedule_and_the_command_follow_the_settings(hub_settings, capsys):
    with override_settings(SPECHUB_IMPORT_REPOS=[f"{ORG}/eagle3-head"]):
        schedules_install()
    assert PeriodicTask.objects.get(name="spechub: import from the Hub").task == "registry.import_from_hub"
    call_command("hub_import", "--repo", f"{ORG}/eagle3-head")
    assert capsys.readouterr().out.startswith(f"gated   {ORG}/eagle3-head: accepted at ")
