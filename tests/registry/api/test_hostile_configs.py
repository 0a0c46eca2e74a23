"""A hostile config.json on the Hub (5,000 levels deep, NaN, Infinity) is a gate finding everywhere, never a 500."""

from __future__ import annotations

import json
import shutil

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from registry.models import Pair, Submission
from zoo.localhub import ZOO

pytestmark = pytest.mark.django_db
VERIFIER = "spechub-toy/llama-verifier"
HOSTILE = {
    "deep": "[" * 5000 + "]" * 5000,
    "deep-object": '{"a": ' * 5000 + "1" + "}" * 5000,
    "nan": None,  # the draft's own config with one NaN
    "infinity": None,
}
HUGE = "x" * 2_000_000


def hostile_config(name: str) -> str:
    if HOSTILE[name] is not None:
        return str(HOSTILE[name])
    config = (ZOO / "spechub-toy" / "llama-draft-1l" / "config.json").read_text()
    value = "NaN" if name == "nan" else "Infinity"
    return config.replace('"rms_norm_eps": ', f'"rms_norm_eps": {value}, "was_rms_norm_eps": ', 1)


@pytest.fixture(scope="module")
def hostile_repos(local_hub, tmp_path_factory):
    """A copy of the toy draft per hostile config, served by the running local hub as hostile/<name>."""
    for name in HOSTILE:
        folder = tmp_path_factory.mktemp(name) / name
        shutil.copytree(ZOO / "spechub-toy" / "llama-draft-1l", folder)
        (folder / "config.json").write_text(hostile_config(name))
        local_hub.publish(f"hostile/{name}", folder)
    return local_hub


NAMED_VERIFIERS = {"path": "../../etc/passwd", "url": "https://evil.example/verifier", "home": "~/models/verifier"}


@pytest.fixture(scope="module")
def heads_naming_hostile_verifiers(local_hub, tmp_path_factory):
    """The toy EAGLE-3 head, its config naming a verifier that is no Hub repo id."""
    head = ZOO / "spechub-toy" / "eagle3-head"
    for name, verifier in NAMED_VERIFIERS.items():
        folder = tmp_path_factory.mktemp(name) / name
        shutil.copytree(head, folder)
        config = (
            (head / "config.json")
            .read_text()
            .replace('"name_or_path": "spechub-toy/llama-verifier"', json.dumps({"name_or_path": verifier})[1:-1])
        )
        assert verifier in config
        (folder / "config.json").write_text(config)
        local_hub.publish(f"hostile/head-{name}", folder)


@pytest.fixture(scope="module")
def draft_with_a_huge_unknown_field(local_hub, tmp_path_factory):
    folder = tmp_path_factory.mktemp("huge") / "huge"
    shutil.copytree(ZOO / "spechub-toy" / "llama-draft-1l", folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "vendor_notes": HUGE, "vendor_table": list(range(100_000))}))
    local_hub.publish("hostile/huge-field", folder)


@pytest.fixture(autouse=True)
def hub(hub_settings, hostile_repos, heads_naming_hostile_verifiers, draft_with_a_huge_unknown_field):
    return hub_settings


def test_the_nan_fixture_really_holds_a_nan():
    assert "NaN" in hostile_config("nan") and "Infinity" in hostile_config("infinity")
    with pytest.raises(ValueError):
        json.loads(hostile_config("nan"), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_compatibility_endpoint_reports_a_hostile_config_as_a_finding(name):
    response = APIClient().post("/api/v1/compatibility/", {"draft": f"hostile/{name}", "verifier": VERIFIER}, format="json")
    assert response.status_code == 200, response.content[:500]
    report = response.json()
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert report["compatible"] is False and errors, report
    assert any("config.json" in f["message"] for f in errors), errors
    assert not Pair.objects.exists()


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_submission_of_a_hostile_config_is_refused_with_the_gates_reason(name):
    client = APIClient()
    client.force_authenticate(User.objects.create_user("alice"))
    response = client.post("/api/v1/submissions/", {"repo_id": f"hostile/{name}", "verifier_repo_id": VERIFIER}, format="json")
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    assert body["status"] == "refused" and body["refusal_code"].startswith("gate:"), body
    assert Submission.objects.get().status == "refused" and not Pair.objects.exists()


@pytest.mark.parametrize("name", ["deep", "nan"])
def test_the_submit_form_shows_the_refusal_for_a_hostile_config(name):
    client = Client()
    client.force_login(User.objects.create_user("alice"))
    page = client.post("/submit/", {"repo_id": f"hostile/{name}", "revision": "main", "verifier_repo_id": VERIFIER,
                                    "verifier_revision": "main"})  # fmt: skip
    assert page.status_code == 200
    assert "config.json" in page.content.decode()


@pytest.mark.parametrize("name", sorted(NAMED_VERIFIERS))
def test_a_verifier_named_by_path_or_url_in_the_drafts_config_is_refused_by_the_gate_not_sent_to_the_hub(name):
    client = APIClient()
    client.force_authenticate(User.objects.create_user("alice"))
    response = client.post("/api/v1/submissions/", {"repo_id": f"hostile/head-{name}"}, format="json")
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    assert (body["status"], body["refusal_code"]) == ("refused", "gate:verifier-local-path"), body
    assert NAMED_VERIFIERS[name] in body["refusal_message"]


def test_a_huge_unknown_config_field_is_echoed_short_in_the_report_and_the_pair_api():
    response = APIClient().post("/api/v1/compatibility/", {"draft": "hostile/huge-field", "verifier": VERIFIER}, format="json")
    assert response.status_code == 200 and response.json()["compatible"] is True, response.content[:500]
    assert len(response.content) < 50_000, len(response.content)
    extra = response.json()["format"]["extra"]
    assert extra["vendor_notes"].endswith("(2000000 characters)") and extra["vendor_table"] == "<array of 100000 items>"


def test_a_megabyte_repo_id_is_refused_without_echoing_it():
    response = APIClient().post("/api/v1/compatibility/", {"verifier": "o/" + "x" * 1_000_000}, format="json")
    assert response.status_code == 400 and "verifier" in response.json()["error"]["details"]
    assert len(response.content) < 5_000, len(response.content)
