"""The REST API: anonymous reads, token-authenticated writes, one error shape, the gate at submission."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import ScopedRateThrottle

from registry.models import CertificationRun, Pair, Submission
from registry.runs.demo import demo_catalog_load
from registry.states import RunState
from tests.support.factories import PairFactory
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db
ORG = "spechub-toy"


@pytest.fixture(autouse=True)
def hub(hub_settings):
    return hub_settings


def client_for(username: str | None) -> APIClient:
    client = APIClient()
    if username:
        user = User.objects.create_user(username)
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def assert_error_shape(response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] and error["message"]
    return error


def test_anonymous_users_read_models_pairs_and_a_pairs_gate_report():
    demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")
    anonymous = APIClient()
    assert (
        anonymous.get("/api/v1/models/").json()["count"] == 11
    )  # 4 Llama, a verifier and a head of 3 more families, Gemma 4's assistant
    pairs = anonymous.get("/api/v1/pairs/", {"method": "eagle3"}).json()
    assert pairs["count"] == 5 and {p["method"] for p in pairs["results"]} == {"eagle3"}  # 2 Llama heads, 3 families
    assert anonymous.get("/api/v1/pairs/", {"method": "eagle3", "family": "gemma4"}).json()["count"] == 1
    detail = anonymous.get(f"/api/v1/pairs/{pairs['results'][0]['id']}/").json()
    assert detail["compatibility"]["compatible"] is True and detail["latest_run"] is None
    assert anonymous.get("/api/v1/runs/").json() == {"count": 0, "next": None, "previous": None, "results": []}
    assert_error_shape(anonymous.get("/api/v1/pairs/999999/"), 404)


def test_anonymous_users_cannot_write():
    anonymous = APIClient()
    assert_error_shape(anonymous.post("/api/v1/submissions/", {"repo_id": f"{ORG}/llama-draft-1l"}), 401)
    assert_error_shape(anonymous.post("/api/v1/runs/1/cancel/"), 401)


def test_the_compatibility_endpoint_judges_without_creating_anything():
    response = APIClient().post(
        "/api/v1/compatibility/", {"draft": f"{ORG}/broken-eagle3-t2d", "verifier": f"{ORG}/llama-verifier"}, format="json"
    )
    assert response.status_code == 200
    report = response.json()
    assert report["compatible"] is False
    assert {f["code"] for f in report["findings"] if f["severity"] == "error"} == {"gate:mapping-t2d", "gate:mapping-d2t"}
    assert not Pair.objects.exists() and not Submission.objects.exists()


def test_a_hostile_repo_id_is_refused_by_validation_with_the_error_shape():
    error = assert_error_shape(APIClient().post("/api/v1/compatibility/", {"verifier": "../../etc/passwd"}, format="json"), 400)
    assert "verifier" in error["details"]


def test_a_broken_submission_is_refused_at_once_with_the_gates_reason():
    response = client_for("alice").post(
        "/api/v1/submissions/",
        {"repo_id": f"{ORG}/broken-custom-code", "verifier_repo_id": f"{ORG}/llama-verifier"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["refusal_code"], body["run"]) == ("refused", "gate:safety-remote-code", None)
    assert not Pair.objects.exists()


def test_a_good_submission_queues_a_run_and_a_second_one_points_to_the_existing_pair():
    alice = client_for("alice")
    first = alice.post("/api/v1/submissions/", {"repo_id": f"{ORG}/eagle3-head"}, format="json")  # verifier from its config
    assert first.status_code == 201, first.content
    body = first.json()
    assert body["status"] == "accepted" and body["verifier_repo_id"] == f"{ORG}/llama-verifier"
    run = CertificationRun.objects.get(pk=body["run"])
    assert run.pair_id == body["pair"] and run.state == RunState.QUEUED
    assert run.requested_by is not None and run.requested_by.username == "alice"
    assert body["validation_report"]["recipe"]["speculative_config"]["method"] == "eagle3"
    again = alice.post("/api/v1/submissions/", {"repo_id": f"{ORG}/eagle3-head"}, format="json").json()
    assert (again["status"], again["pair"], again["run"]) == ("duplicate", body["pair"], None)


def test_users_cancel_their_own_runs_and_not_others():
    alice, bob = client_for("alice"), client_for("bob")
    run_id = alice.post(
        "/api/v1/submissions/", {"repo_id": f"{ORG}/llama-draft-1l", "verifier_repo_id": f"{ORG}/llama-verifier"}, format="json"
    ).json()["run"]
    error = assert_error_shape(bob.post(f"/api/v1/runs/{run_id}/cancel/"), 403)
    assert "requested this run" in error["message"]
    assert alice.post(f"/api/v1/runs/{run_id}/cancel/").json()["state"] == "cancelled"
    assert_error_shape(alice.post(f"/api/v1/runs/{run_id}/cancel/"), 409)  # already final


def test_submissions_are_rate_limited_with_retry_after(settings):
    settings.SPECHUB_SUBMISSION_RATE = "2/minute"
    alice = client_for("alice")
    payload = {"repo_id": f"{ORG}/broken-pickle-only", "verifier_repo_id": f"{ORG}/llama-verifier"}
    assert [alice.post("/api/v1/submissions/", payload, format="json").status_code for _ in range(2)] == [200, 200]
    limited = alice.post("/api/v1/submissions/", payload, format="json")
    assert_error_shape(limited, 429)
    assert 0 < int(limited["Retry-After"]) <= 60


def test_requests_refused_by_validation_do_not_use_up_the_submission_quota(settings):
    settings.SPECHUB_SUBMISSION_RATE = "2/minute"
    alice = client_for("alice")
    bad = {"repo_id": "../../etc/passwd"}
    assert {alice.post("/api/v1/submissions/", bad, format="json").status_code for _ in range(5)} == {400}
    payload = {"repo_id": f"{ORG}/broken-pickle-only", "verifier_repo_id": f"{ORG}/llama-verifier"}
    assert [alice.post("/api/v1/submissions/", payload, format="json").status_code for _ in range(3)] == [200, 200, 429]
    assert client_for("bob").post("/api/v1/submissions/", payload, format="json").status_code == 200  # per user


def test_anonymous_gate_verdicts_are_rate_limited_and_the_matrix_is_not(monkeypatch):
    from django.core.cache import cache

    cache.clear()
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"compatibility": "2/minute"})
    payload = {"draft": f"{ORG}/llama-draft-1l", "verifier": f"{ORG}/llama-verifier"}
    codes = [APIClient().post("/api/v1/compatibility/", payload, format="json").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    assert {APIClient().get("/api/v1/compatibility/").status_code for _ in range(4)} == {200}


def test_a_gate_verdict_asked_again_is_served_from_the_cache_without_rereading_the_repos(hub):
    from django.core.cache import cache

    cache.clear()
    payload = {"draft": f"{ORG}/eagle3-head", "verifier": f"{ORG}/llama-verifier"}
    first = APIClient().post("/api/v1/compatibility/", payload, format="json").json()
    reads = hub.fetch_count(f"{ORG}/eagle3-head", "config.json")
    again = APIClient().post("/api/v1/compatibility/", payload, format="json").json()
    assert again == first and first["compatible"] is True
    assert hub.fetch_count(f"{ORG}/eagle3-head", "config.json") == reads >= 1


def test_the_openapi_schema_validates_and_lists_the_endpoints():
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert schema["openapi"].startswith("3.")
    for path in (
        "/api/v1/models/",
        "/api/v1/pairs/",
        "/api/v1/pairs/{id}/",
        "/api/v1/runs/",
        "/api/v1/submissions/",
        "/api/v1/compatibility/",
    ):
        assert path in schema["paths"], path


@pytest.mark.parametrize(
    "path", ["/api/v1/recommendations/?verifier=nobody/none", "/api/v1/pairs/", "/api/v1/compatibility/", "/api/v1/export/"]
)
def test_answers_with_nulls_validate_against_the_published_openapi_3_1_schema(db, path):
    """3.1 validators ignore 3.0's `nullable`: a null the server sends (no best draft, no next page) must be allowed
    the 3.1 way, or a client generated from the schema refuses the answer."""
    PairFactory.create()  # never certified: its verdict, figures and run are nulls in every answer
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert '"nullable"' not in json.dumps(schema)
    answer = APIClient().get(path, HTTP_ACCEPT="application/json")
    published = schema["paths"][path.split("?")[0]]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    jsonschema.Draft202012Validator({**published, "components": schema["components"]}).validate(answer.json())


def test_the_docs_page_serves_its_assets_locally():
    page = APIClient().get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
    assert "cdn" not in page.lower()


def test_only_staff_trigger_a_recertification():
    pair = demo_catalog_load(zoo_dir=ROOT / "zoo" / "models")[0]
    assert_error_shape(client_for("alice").post(f"/api/v1/pairs/{pair.pk}/recertify/"), 403)
    staff = client_for("root")
    User.objects.filter(username="root").update(is_staff=True)
    response = staff.post(f"/api/v1/pairs/{pair.pk}/recertify/")
    assert response.status_code == 201 and response.json()["pair"] == pair.pk and response.json()["state"] == "queued"


def test_a_rotating_x_forwarded_for_does_not_reset_the_anonymous_gate_limit(monkeypatch):
    from django.core.cache import cache

    cache.clear()
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"compatibility": "2/minute"})
    payload = {"draft": f"{ORG}/llama-draft-1l", "verifier": f"{ORG}/llama-verifier"}
    codes = [
        APIClient().post("/api/v1/compatibility/", payload, format="json", HTTP_X_FORWARDED_FOR=f"203.0.113.{i}").status_code
        for i in range(3)
    ]
    assert codes == [200, 200, 429]  # one peer, whatever header it writes
