"""Every id and count a page or an endpoint takes from a query string, a form or a JSON body: a 4xx with the reason for
anything but ASCII digits in range, never a 500, and never a full-width digit read as a number (registry/params.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from registry.models import Deployment, Workload
from registry.params import whole_number, whole_number_or_none
from registry.states import RunState
from tests.support.factories import PairFactory, RunFactory

pytestmark = pytest.mark.django_db

FULL_WIDTH_ONE = "\uff11"
HOSTILE = ["²", FULL_WIDTH_ONE, "9" * 5000, "-1", "0", "1e3"]
IDS = ["superscript", "full-width", "5000-digits", "negative", "zero", "exponent"]


@pytest.fixture
def owner(db: Any) -> User:
    return User.objects.create_user("owner", password="pw")


@pytest.fixture
def signed_in(owner: User) -> Client:
    client = Client(raise_request_exception=False)  # a 500 must show as a 500 here, not as an exception
    client.force_login(owner)
    return client


@pytest.fixture
def pair(db: Any) -> Any:
    found = PairFactory.create()
    RunFactory.create(pair=found, state=RunState.FINISHED, finished_at=timezone.now(), result={"schema_version": 3})
    return found


@pytest.fixture
def deployment(owner: User, pair: Any) -> Deployment:
    return Deployment.objects.create(owner=owner, name="prod", pair=pair)


@pytest.fixture
def workload(owner: User, pair: Any) -> Workload:
    return Workload.objects.create(owner=owner, name="mine", verifier=pair.verifier, sha256="0" * 64, format="jsonl",
                                   total_requests=1, unique_requests=1)  # fmt: skip


def test_the_helper_takes_ascii_digits_in_range_and_nothing_else():
    assert whole_number("42", name="n") == 42 and whole_number(None, name="n", default=7) == 7
    assert whole_number_or_none(3) == 3 and whole_number_or_none(True) is None and whole_number_or_none(1.0) is None
    for given in HOSTILE:
        assert whole_number_or_none(given, low=1, high=10**6) is None, given


def _refused(answer: Any, *, name: str) -> str:
    """The answer's text after checking that it is a 4xx that names the parameter."""
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.content[:300])
    text: str = answer.content.decode()
    assert len(text) < 20_000 and "9" * 200 not in text  # the refusal quotes at most 100 characters of what was sent
    return text


@pytest.mark.both_databases
@pytest.mark.parametrize("given", HOSTILE, ids=IDS)
def test_query_string_counts_on_pages_are_a_400_naming_the_parameter(signed_in, deployment, workload, given):
    for path, name in [
        (f"/deployments/{deployment.pk}/?days=", "days"),
        (f"/workloads/{workload.pk}/?concurrency=", "concurrency"),
        ("/?page=", "page"),
        ("/runs/?page=", "page"),
        ("/imports/?page=", "page"),
    ]:
        text = _refused(signed_in.get(path + given), name=name)
        assert name in text and "ASCII digits" in text, (path, text[:500])


@pytest.mark.parametrize("given", HOSTILE, ids=IDS)
def test_query_string_counts_in_the_api_are_a_400_in_the_one_error_shape(signed_in, deployment, workload, given):
    for path, name in [
        (f"/api/v1/deployments/{deployment.pk}/observations/?days=", "days"),
        (f"/api/v1/workloads/{workload.pk}/report/?concurrency=", "concurrency"),
        ("/api/v1/pairs/?page=", "page"),
        ("/api/v1/runs/?page=", "page"),
        ("/api/v1/recommendations/?verifier=org/name&concurrency=", "concurrency"),
    ]:
        answer = signed_in.get(path + given)
        _refused(answer, name=name)
        assert answer.status_code == 400 and name in answer.json()["error"]["details"], (path, answer.content[:300])


@pytest.mark.both_databases
@pytest.mark.parametrize("given", HOSTILE, ids=IDS)
def test_form_ids_are_refused_with_the_reason_and_register_nothing(signed_in, pair, workload, given):
    for form, said in [
        ({"name": "prod", "pair": given}, "Choose a certified pair"),
        ({"name": "prod", "pair": str(pair.pk), "workload": given}, "Choose one of your workloads"),
    ]:
        text = _refused(signed_in.post("/deployments/", form), name="pair")
        assert said in text
    certify = signed_in.post(f"/workloads/{workload.pk}/", {"action": "certify", "pair": given})
    _refused(certify, name="pair")
    assert not Deployment.objects.exists()


@pytest.mark.parametrize("given", [*HOSTILE, "1.0", True, 1.5], ids=[*IDS, "decimal", "boolean", "fraction"])
def test_json_ids_are_whole_numbers_only(signed_in, pair, given):
    body = {"name": "prod", "pair": given}
    answer = signed_in.post("/api/v1/deployments/", json.dumps(body), content_type="application/json")
    assert answer.status_code == 400 and "pair" in answer.json()["error"]["details"], answer.content[:300]
    assert not Deployment.objects.exists()


def test_a_deployment_page_lists_only_pairs_certified_on_the_public_suite(signed_in, pair, workload):
    private = PairFactory.create()
    RunFactory.create(pair=private, state=RunState.FINISHED, finished_at=timezone.now(), workload=workload)
    page = signed_in.get("/deployments/").content.decode()
    assert f'value="{pair.pk}"' in page and f'value="{private.pk}"' not in page
    refused = signed_in.post("/deployments/", {"name": "prod", "pair": str(private.pk)})
    assert refused.status_code == 422 and "Choose a certified pair" in refused.content.decode()


def test_an_error_quotes_at_most_100_characters_of_what_was_sent(db):
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    pair = PairFactory.create()
    answer = client.post(f"/api/v1/pairs/{pair.pk}/recertify/?hardware={'x' * 5000}")
    assert answer.status_code == 400 and "x" * 100 in answer.content.decode()
    assert "x" * 101 not in answer.content.decode() and "5000 characters" in answer.content.decode()
    choice = client.get(f"/api/v1/pairs/?method={'y' * 5000}")  # DRF's and django-filter's own messages quote it whole
    assert choice.status_code == 400 and "y" * 101 not in choice.content.decode(), choice.content[:300]


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_a_bad_page_parameter_is_the_400_page_with_its_reason_debug_on_or_off(signed_in, settings, debug):
    settings.DEBUG = debug
    answer = signed_in.get("/runs/?page=" + FULL_WIDTH_ONE)
    text = answer.content.decode()
    assert answer.status_code == 400 and "page: " in text and "ASCII digits" in text
    assert "Request Method" not in text  # not Django's debug page, whose inline script the CSP blocks
