"""A quantized pair's AL change against the pair it derives from, paired per prompt, from two stored runs (issue 53 §2).

No engine: each run is finished through the real services with a constructed result document that carries what the
worker writes (each prompt's counters, and which checkpoint is quantized from which base).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from kernel import quantized as kernel_quantized
from kernel.quantized import al_change
from registry.certificates.revocation import certificate_revoke
from registry.models import CertificationRun, HubModel, Pair
from registry.runs.quantized import JUDGED_BASE, JUDGED_QUANTIZED, quantized_comparison
from registry.runs.services import run_claim, run_create, run_finish
from tests.support.factories import PairFactory, fake_sha
from tests.support.runs import result_document

pytestmark = pytest.mark.django_db

SUITE = {"suite": "toy-v2", "sha256": "a" * 64, "prompts": 32, "private": False}
BASE_DRAFT, VERIFIER = "spechub-toy/llama-draft-1l", "spechub-toy/llama-verifier"
INT8 = {"scheme": "compressed-tensors:w8a8-int8"}
# Each prompt's (drafting steps, accepted tokens): the quantized draft loses about one token in ten on every prompt.
DRAFTS = [10 + 3 * (i % 7) for i in range(32)]
ACCEPTED = [round(d * (1.5 + (i % 5) * 0.4)) for i, d in enumerate(DRAFTS)]
LOST = [a - max(1, d // 10) for a, d in zip(ACCEPTED, DRAFTS, strict=True)]


def model(repo_id: str, role: str) -> HubModel:
    found, _ = HubModel.objects.get_or_create(repo_id=repo_id, sha=fake_sha(repo_id), defaults={"role": role})
    return found


def finish(
    pair: Pair, accepted: list[int] | None, quantization: dict[str, Any], suite: dict[str, Any] = SUITE
) -> CertificationRun:
    run = run_create(pair=pair, hardware="cpu")
    spec = run_claim(run_id=run.pk, worker="test")
    assert spec is not None
    document = result_document(spec, verdict="certified", speedup=1.5, al=3.0, version="0.32.0")
    document["environment"] = {**document["environment"], "hardware_class": "cpu", "k": 4, "workloads": suite,
                               "quantization": quantization}  # fmt: skip
    if accepted is not None:
        document["stages"]["speculative"]["acceptance"]["per_prompt"] = {"drafts": DRAFTS, "accepted": accepted}
    return run_finish(run_id=run.pk, attempt=spec.attempt, document=document)


def pairs(*, verifier_quantized: bool = False) -> tuple[Pair, Pair]:
    verifier = model(VERIFIER, "verifier")
    base = PairFactory.create(verifier=verifier, draft=model(BASE_DRAFT, "draft"))
    quantized_verifier = model(f"{VERIFIER}-w8a8-int8", "verifier") if verifier_quantized else verifier
    return base, PairFactory.create(verifier=quantized_verifier, draft=model(f"{BASE_DRAFT}-w8a8-int8", "draft"))


def draft_quantized() -> dict[str, Any]:
    return {"draft": {**INT8, "base_model": BASE_DRAFT}, "verifier": None}


def test_a_quantized_draft_is_paired_per_prompt_with_its_base_pairs_run_on_the_page_and_in_the_api():
    base, quantized = pairs()
    base_run = finish(base, ACCEPTED, {"draft": None, "verifier": None})
    finish(base, None, {}, suite={**SUITE, "sha256": "b" * 64})  # another suite, newer: not paired
    run = finish(quantized, LOST, draft_quantized())
    found = quantized_comparison(run=run)
    assert found is not None and found["against_run"] == base_run.pk and found["change"] is not None
    change = found["change"]
    assert change["prompts"] == 32 and change["reading"] == "lower" and change["interval"] is not None
    assert change["interval"][1] < 0 < change["al_unquantized"] - change["al"]
    assert found["derives_from"] == f"{BASE_DRAFT} with {VERIFIER}" and found["equivalence"] == JUDGED_BASE
    api = Client().get(f"/api/v1/runs/{run.pk}/").json()["quantized"]
    assert api["against_run"] == base_run.pk and api["change"]["interval"] == pytest.approx(change["interval"])
    page = Client().get(f"/pairs/{quantized.pk}/").content.decode()
    assert "What quantization costs in acceptance" in page and f"against run {base_run.pk}" in page
    assert "paired: lower" in page


def test_without_its_base_pairs_run_it_says_which_pair_to_certify_first():
    base, quantized = pairs(verifier_quantized=True)
    both = {"draft": {**INT8, "base_model": BASE_DRAFT}, "verifier": {**INT8, "base_model": VERIFIER}}
    finish(base, ACCEPTED, {"draft": None, "verifier": None}, suite={**SUITE, "prompts": 28})  # other prompts
    found = quantized_comparison(run=finish(quantized, LOST, both))
    assert found is not None and found["change"] is None and found["against_run"] is None
    assert found["text"] == f"not compared: certify {BASE_DRAFT} with {VERIFIER} first, on the same suite, build, hardware and k"
    assert found["equivalence"] == JUDGED_QUANTIZED  # judged against the quantized verifier, and the page says so


def test_a_base_run_without_per_prompt_counters_and_a_draft_naming_no_base_are_not_compared():
    base, quantized = pairs()
    base_run = finish(base, None, {"draft": None, "verifier": None})
    found = quantized_comparison(run=finish(quantized, LOST, draft_quantized()))
    assert found is not None and found["text"].startswith(f"not compared: run {base_run.pk} kept no per-prompt counters")
    nameless = quantized_comparison(run=finish(quantized, LOST, {"draft": {**INT8, "base_model": None}}))
    assert nameless is not None and "names no base_model" in nameless["text"]


def test_an_unquantized_pair_shows_no_comparison():
    base, _ = pairs()
    run = finish(base, ACCEPTED, {"draft": None, "verifier": None})
    assert quantized_comparison(run=run) is None
    assert Client().get(f"/api/v1/runs/{run.pk}/").json()["quantized"] is None


def test_a_revoked_base_run_is_no_reference_and_the_next_newest_unrevoked_one_is_paired():
    base, quantized = pairs()
    older = finish(base, ACCEPTED, {"draft": None, "verifier": None})
    newer = finish(base, ACCEPTED, {"draft": None, "verifier": None})
    run = finish(quantized, LOST, draft_quantized())
    found = quantized_comparison(run=run)
    assert found is not None and found["against_run"] == newer.pk
    staff = User.objects.create_user("staff", is_staff=True)
    certificate_revoke(certificate_id=newer.certificate.pk, user=staff, reason="the base draft was swapped")
    found = quantized_comparison(run=run)
    assert found is not None and found["against_run"] == older.pk
    certificate_revoke(certificate_id=older.certificate.pk, user=staff, reason="the same")
    found = quantized_comparison(run=run)
    assert found is not None and found["against_run"] is None and found["text"].startswith("not compared: certify")


def test_per_prompt_counters_that_are_not_one_a_prompt_are_not_paired():
    base, quantized = pairs()
    finish(base, ACCEPTED + ACCEPTED, {"draft": None, "verifier": None})  # 64 counters of a run of 32 prompts
    found = quantized_comparison(run=finish(quantized, LOST, draft_quantized()))
    assert found is not None and found["change"] is None and "kept no per-prompt counters of its prompts" in found["text"]


def test_the_comparison_is_computed_once_and_kept_not_on_every_view(monkeypatch):
    base, quantized = pairs()
    finish(base, ACCEPTED, {"draft": None, "verifier": None})
    run = finish(quantized, LOST, draft_quantized())
    computed: list[int] = []

    def counted(*sides: Any) -> Any:
        computed.append(len(sides))
        return al_change(*sides)

    monkeypatch.setattr(kernel_quantized, "al_change", counted)
    first = quantized_comparison(run=run)
    with CaptureQueriesContext(connection) as queries:
        again = quantized_comparison(run=run)
    assert again == first and len(computed) == 1
    assert not [query for query in queries.captured_queries if "stages" in query["sql"]]  # no document read again
