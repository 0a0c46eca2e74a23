"""The small ones of issue 52 (§6), on the registry: a self-hosted worker's qualification record is its owner's and
staff's only; identical uploads sent at once all get the same answer; a user holds a bounded number of registration
tokens and workers; and no answer that shows a secret may be kept by a cache."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token

from registry.models import CertificationRun, Worker, WorkerEvent
from registry.runs.qualifications import qualification_record
from registry.states import RunState
from tests.registry.test_fleet_api import API, _spec, post, private_run, registered, signed_in
from tests.support import qualification
from tests.support.documents import whole_document
from tests.support.factories import PairFactory

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


@pytest.fixture
def owner(db: Any) -> User:
    return User.objects.create_user("team", password="pw")


@pytest.fixture
def stranger(db: Any) -> User:
    return User.objects.create_user("stranger", password="pw")


def test_a_self_hosted_qualification_record_is_its_owners_and_staffs_only_and_others_get_the_missing_ones_404(owner, stranger):
    _, worker_id = registered(owner, ["gpu.h100"])
    theirs = qualification.record(hardware="gpu.h100")
    qualification_record(document=theirs, worker=Worker.objects.get(pk=worker_id), rejudge=False)
    hosted = qualification_record(document=qualification.record(hardware="cpu"))
    staff = User.objects.create_user("operator", password="pw", is_staff=True)
    url = f"/api/v1/engines/{theirs['digest']}/"
    assert signed_in(owner).get(url).json()["digest"] == theirs["digest"]
    assert signed_in(staff).get(url).status_code == 200
    missing = Client().get(f"/api/v1/engines/{'0' * 64}/")
    for reader in (Client(), signed_in(stranger)):
        answer = reader.get(url)
        assert answer.status_code == 404 and answer.json()["error"]["message"].startswith("No engine qualification has")
        assert answer.json()["error"]["code"] == missing.json()["error"]["code"]
    assert Client().get(f"/api/v1/engines/{hosted.digest}/").status_code == 200  # the hosted pool's stays public


@pytest.mark.django_db(transaction=True)
def test_identical_uploads_sent_at_once_all_get_the_same_answer_and_one_is_kept(owner):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite takes one writer at a time: the race needs PostgreSQL's row locks")
    worker, _ = registered(owner, ["gpu.h100"])
    run = private_run(owner)
    claimed, credential = post(worker, f"{API}/claim/").json(), worker.defaults["HTTP_AUTHORIZATION"]
    body = {"attempt": claimed["attempt"],
            "document": whole_document(_spec(claimed).as_dict())}  # fmt: skip
    start, answers = threading.Barrier(6), []

    def upload() -> None:
        try:
            start.wait()
            machine = Client(headers={"Authorization": credential})  # a client each, as the worker's retries are
            answer = post(machine, f"{API}/runs/{run.pk}/result/", body)
            answers.append((answer.status_code, answer.json()))
        finally:
            connection.close()

    threads = [threading.Thread(target=upload) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == [(202, {"run": run.pk, "state": RunState.PUBLISHING})] * 6, answers
    assert WorkerEvent.objects.filter(run=run, action="uploaded").count() == 1
    assert not WorkerEvent.objects.filter(run=run, action="refused").exists()


def test_open_registration_tokens_are_capped_per_user_and_the_refusal_names_the_limit(owner, settings):
    settings.SPECHUB_REGISTRATION_TOKENS_PER_USER = 2
    client = signed_in(owner)
    made = [post(client, f"{API}/tokens/", {"labels": ["gpu.h100"]}) for _ in range(3)]
    assert [answer.status_code for answer in made] == [201, 201, 403]
    refused = made[2].json()["error"]
    assert refused["code"] == "limit" and "You have 2 unused registration tokens" in refused["message"]
    assert "SPECHUB_REGISTRATION_TOKENS_PER_USER" in refused["message"]
    page = client.post("/workers/", {"labels": ["gpu.h100"]})
    assert page.status_code == 422 and "the limit per user" in page.content.decode()
    body = {"registration_token": made[0].json()["registration_token"], "name": "box-1", "engine_build": "0.32.0"}
    assert post(Client(), f"{API}/register/", body).status_code == 201  # a used token is no longer open
    assert post(client, f"{API}/tokens/", {"labels": ["gpu.h100"]}).status_code == 201


def test_workers_are_capped_per_user_and_a_refused_registration_spends_no_token(owner, settings):
    settings.SPECHUB_WORKERS_PER_USER = 1
    _, first = registered(owner, ["gpu.h100"])
    token = post(signed_in(owner), f"{API}/tokens/", {"labels": ["gpu.h100"]}).json()["registration_token"]
    body = {"registration_token": token, "name": "box-2", "engine_build": "0.32.0"}
    refused = post(Client(), f"{API}/register/", body)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "limit", refused.content
    assert "You have 1 workers, the limit per user (SPECHUB_WORKERS_PER_USER)" in refused.json()["error"]["message"]
    assert post(signed_in(owner), f"{API}/{first}/revoke/").status_code == 200
    assert post(Client(), f"{API}/register/", body).status_code == 201  # the same token, once a worker is revoked
    assert Worker.objects.filter(owner=owner, revoked_at__isnull=True).count() == 1


def no_store(answer: Any) -> bool:
    return "no-store" in answer.get("Cache-Control", "")


def test_every_answer_that_shows_a_secret_token_tells_caches_not_to_keep_it(owner):
    client = signed_in(owner)
    token = post(client, f"{API}/tokens/", {"labels": ["gpu.h100"]})
    assert token.status_code == 201 and no_store(token)
    body = {"registration_token": token.json()["registration_token"], "name": "box-1", "engine_build": "0.32.0"}
    credential = post(Client(), f"{API}/register/", body)
    assert credential.status_code == 201 and no_store(credential)
    page = client.post("/workers/", {"labels": ["gpu.h100"]})
    assert "shr_" in page.content.decode() and no_store(page)
    deployment = post(client, "/api/v1/deployments/", {"name": "prod", "pair": PairFactory.create().pk})
    assert deployment.status_code == 201 and deployment.json()["ingest_token"] and no_store(deployment)
    pk = deployment.json()["id"]
    assert no_store(post(client, f"/api/v1/deployments/{pk}/token/"))
    reissued = client.post(f"/deployments/{pk}/token/")
    assert "shd_" in reissued.content.decode() and no_store(reissued)
    staff = User.objects.create_user("operator", password="pw", is_staff=True, is_superuser=True)
    Token.objects.create(user=owner)  # API tokens are shown in the admin only, which no cache keeps either
    assert no_store(signed_in(staff).get("/admin/authtoken/tokenproxy/"))
    assert not CertificationRun.objects.exists()
