"""Engine qualifications in the registry: stored with their digest checked, runs judged again with them,
the Engines page and /api/v1/engines/, and the pair page's per-property verdict with its attribution."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from kernel import certificates
from registry.certificates.services import verifying_key
from registry.models import Certificate, EngineQualification
from registry.runs.demo import demo_catalog_load
from registry.runs.qualifications import QualificationRefused, build_qualify_if_new, qualification_record, runs_rejudge_all
from registry.runs.services import run_claim, run_create, run_finish
from tests.support.factories import PairFactory
from tests.support.processes import ROOT
from tests.support.qualification import judged_document, record

pytestmark = pytest.mark.django_db


def finished_run(p_value: float = 1e-9, engine_build: str = "0.32.0"):
    """A draft_model pair's run finished through the services, its sampling test rejecting."""
    run = run_create(pair=PairFactory.create(), hardware="cpu")
    spec = run_claim(run_id=run.pk, worker="test")
    assert spec is not None
    return run_finish(
        run_id=run.pk, attempt=spec.attempt, document=judged_document(spec, p_value=p_value, engine_build=engine_build)
    )


def sampling_of(run):
    run.refresh_from_db()
    return run.result["stages"]["verdict"]["properties"]["sampling"]


def test_without_a_qualification_a_rejection_is_not_blamed_on_the_draft():
    run = finished_run()
    assert (sampling_of(run)["outcome"], sampling_of(run)["fault"]) == ("not-judgeable", None)
    assert run.pair.verdict == "provisional"


def test_storing_a_failing_qualification_judges_the_runs_on_its_build_again_and_signs_them_again():
    run = finished_run()
    before = Certificate.objects.get(run=run).digest
    stored = qualification_record(document=record(draft_model="fail"))
    assert (stored.passed, stored.failing) == (False, ["draft_model"])
    sampling = sampling_of(run)
    assert (sampling["outcome"], sampling["fault"], sampling["evidence"]["control"]) == ("not-judgeable", "engine", "draft_model")
    certificate = Certificate.objects.get(run=run)
    assert certificate.digest != before
    payload: Any = certificates.verify(certificate.document.encode(), verifying_key()).payload
    assert payload["qualification"]["digest"] == stored.digest
    assert payload["properties"]["sampling"]["fault"] == "engine"


def test_a_passing_qualification_turns_the_rejection_into_the_pairs_failure():
    run = finished_run()
    qualification_record(document=record())
    assert (sampling_of(run)["outcome"], sampling_of(run)["fault"]) == ("fail", "pair")
    run.pair.refresh_from_db()
    assert run.pair.verdict == "failed"


def test_a_qualification_of_another_build_leaves_the_run_as_it_was():
    run = finished_run()
    qualification_record(document=record(engine_build="0.33.0"))
    assert sampling_of(run)["fault"] is None


def test_a_run_finishing_on_a_qualified_build_is_judged_with_its_qualification():
    stored = qualification_record(document=record(eagle3="fail", draft_model="fail"))
    run = finished_run()
    assert sampling_of(run)["evidence"]["qualification"]["digest"] == stored.digest
    assert run.result["stages"]["verdict"]["qualification"]["digest"] == stored.digest


def test_a_record_whose_content_does_not_match_its_digest_is_refused_and_nothing_is_stored():
    tampered = record(draft_model="fail")
    tampered["controls"][2]["outcome"] = "pass"
    with pytest.raises(QualificationRefused, match="digest does not match"):
        qualification_record(document=tampered)
    assert not EngineQualification.objects.exists()


def test_the_engines_page_shows_each_control_and_what_it_means_for_pairs():
    stored = qualification_record(document=record(draft_model="fail", eagle3="fail", **{"self-draft": "fail"}))
    page = Client().get("/engines/").content.decode()
    assert "vllm 0.32.0 · cpu · float32" in page and "3 controls fail" in page
    assert "sampling equivalence of draft_model, eagle3 pairs is not judgeable on this build" in page
    assert f'id="q-{stored.digest[:12]}"' in page and f"/api/v1/engines/{stored.digest}/" in page
    assert page.count('class="verdict verdict-failed">fail<') == 3


def test_the_engines_page_says_how_to_qualify_when_nothing_is_qualified():
    page = Client().get("/engines/").content.decode()
    assert "No engine build has been qualified yet" in page and "python -m workers qualify" in page


def test_the_api_lists_builds_and_serves_the_whole_record_by_digest():
    stored = qualification_record(document=record(draft_model="fail"))
    listed = Client().get("/api/v1/engines/").json()
    assert [(b["engine_build"], b["passed"], b["failing"]) for b in listed] == [("0.32.0", False, ["draft_model"])]
    assert {c["name"]: c["outcome"] for c in listed[0]["controls"]}["draft_model"] == "fail"
    whole = Client().get(listed[0]["record"]).json()
    assert whole["digest"] == stored.digest and whole["controls"][0]["sampling"][0]["probes"][0]["power"]["tv"] == 0.1
    missing = Client().get("/api/v1/engines/" + "0" * 64 + "/")
    assert missing.status_code == 404 and "/api/v1/engines/ lists them" in json.dumps(missing.json())


def test_the_pair_page_and_the_run_api_say_whose_fault_each_property_is():
    stored = qualification_record(document=record(draft_model="fail"))
    run = finished_run()
    page = Client().get(f"/pairs/{run.pair_id}/").content.decode()
    assert "sampling not judgeable on this engine build (engine control fails: draft_model" in page
    assert "the engine build" in page and f'href="/engines/#q-{stored.digest[:12]}"' in page
    verdict = Client().get(f"/api/v1/runs/{run.pk}/").json()["verdict"]
    assert verdict["properties"]["sampling"]["fault"] == "engine"
    assert verdict["properties"]["greedy"]["outcome"] == "pass"
    assert verdict["qualification"]["digest"] == stored.digest


def test_a_new_build_is_queued_for_qualification_once(django_capture_on_commit_callbacks):
    with override_settings(SPECHUB_QUALIFY_NEW_BUILDS=True), django_capture_on_commit_callbacks() as sent:
        assert build_qualify_if_new(engine="vllm", hardware="cpu", engine_build="0.32.0")
    assert len(sent) == 1
    qualification_record(document=record())
    with override_settings(SPECHUB_QUALIFY_NEW_BUILDS=True):
        assert not build_qualify_if_new(engine="vllm", hardware="cpu", engine_build="0.32.0")
    with override_settings(SPECHUB_QUALIFY_NEW_BUILDS=False):
        assert not build_qualify_if_new(engine="vllm", hardware="cpu", engine_build="0.34.0")


def test_the_self_draft_is_shown_as_a_control_not_a_draft_to_deploy():
    pair = next(p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models") if p.draft and p.draft == p.verifier)
    assert "A control, not a draft to deploy" in Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert Client().get("/").content.decode().count("(a control: the verifier as its own draft)") == 1


def test_rejudging_under_new_rules_changes_only_runs_whose_outcome_changes_and_signs_them_again():
    # A run judged by the old rules: its conditional sampling test (310 draws, no power stated) read "pass".
    old = run_create(pair=PairFactory.create(), hardware="cpu")
    spec = run_claim(run_id=old.pk, worker="test")
    assert spec is not None
    document = judged_document(spec, p_value=0.5)
    document["stages"]["equivalence"]["sampling"] = [
        {"prefix": 0, "given_first_token": 42, "samples": 310, "bins": 9, "statistic": 7.0, "dof": 8, "p_value": 0.5}
    ]
    old = run_finish(run_id=old.pk, attempt=spec.attempt, document=document)
    assert old.pair.verdict == "certified"
    current = finished_run(p_value=0.5)  # a powered joint test: the same outcome under the new rules
    signed = {run.pk: Certificate.objects.get(run=run).digest for run in (old, current)}

    out = StringIO()
    call_command("rejudge", stdout=out)
    assert f"run {old.pk}" in out.getvalue() and f"run {current.pk}" not in out.getvalue()
    assert "1 run judged differently" in out.getvalue()
    assert sampling_of(old)["outcome"] == "inconclusive" and "detect only TV" in sampling_of(old)["reason"]
    old.pair.refresh_from_db()
    assert old.pair.verdict == "provisional"
    assert Certificate.objects.get(run=old).digest != signed[old.pk]
    assert Certificate.objects.get(run=current).digest == signed[current.pk]
    assert runs_rejudge_all() == []  # once judged, judged
