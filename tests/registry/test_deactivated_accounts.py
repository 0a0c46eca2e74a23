"""A deactivated account is gone everywhere (issue 52, §2): its workers' credentials, its unused registration tokens,
its deployments' ingest tokens and its API tokens all stop at once, and the runs its workers hold go back to the
queue. Deactivating is what staff do in the admin: untick "active" and save."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from registry.deployments.services import deployment_create
from registry.models import CertificationRun, LiveSnapshot, RegistrationToken, Worker
from registry.states import RunState
from tests.registry.test_fleet_api import API, post, private_run, registered, signed_in
from tests.support.factories import PairFactory

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


@pytest.fixture
def owner(db: Any) -> User:
    return User.objects.create_user("team", password="pw")


def deactivated(user: User) -> None:
    user.is_active = False
    user.save()  # as the admin's change form saves it


def test_a_deactivated_owners_worker_is_refused_with_the_reason_and_its_lease_goes_back_to_the_queue_at_once(owner):
    worker, worker_id = registered(owner, ["gpu.h100"])
    run = private_run(owner)
    attempt = post(worker, f"{API}/claim/").json()["attempt"]
    deactivated(owner)
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.worker is None and run.error_code == "worker:lost"
    assert "owner was deactivated" in run.error_message
    for path, body in (("claim/", {}), (f"runs/{run.pk}/heartbeat/", {"attempt": attempt}), ("me/", None)):
        answer = worker.get(f"{API}/{path}") if body is None else post(worker, f"{API}/{path}", body)
        assert answer.status_code == 401, (path, answer.content)
        assert answer.json()["error"]["code"] == "owner-deactivated" and "is deactivated" in answer.json()["error"]["message"]
    assert Worker.objects.get(pk=worker_id).revoked_at is None  # nothing revoked: staff may reactivate the account
    owner.is_active = True
    owner.save()
    assert post(worker, f"{API}/claim/").json()["attempt"] == 2  # and the machine takes its owner's run again


def test_a_deactivated_owners_unused_registration_token_registers_no_worker_and_stays_unspent(owner):
    token = post(signed_in(owner), f"{API}/tokens/", {"labels": ["gpu.h100"]}).json()["registration_token"]
    deactivated(owner)
    answer = post(Client(), f"{API}/register/", {"registration_token": token, "name": "box-2", "engine_build": "0.32.0"})
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "owner-deactivated", answer.content
    assert "reactivate the account" in answer.json()["error"]["message"]
    assert not Worker.objects.exists() and RegistrationToken.objects.get().used_at is None


def test_a_deactivated_owners_ingest_token_stores_no_snapshot(owner):
    deployment, token = deployment_create(owner=owner, name="prod", pair=PairFactory.create())
    now = timezone.now().timestamp()

    def pushed(at: float, drafts: int) -> Any:
        snapshot = {"read_at": at, "drafts": drafts, "draft_tokens": 4 * drafts, "accepted": 2 * drafts,
                    "per_position": [drafts, drafts // 2, drafts // 4, drafts // 8], "requests": drafts // 10}  # fmt: skip
        return Client().post(f"/api/v1/deployments/{deployment.pk}/observations/", {"snapshots": [snapshot]},
                             content_type="application/json", headers={"Authorization": f"Bearer {token}"})  # fmt: skip

    assert pushed(now - 60, 100).status_code == 201
    deactivated(owner)
    refused = pushed(now - 30, 200)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "owner-deactivated", refused.content
    assert LiveSnapshot.objects.filter(deployment=deployment).count() == 1


def test_a_deactivated_users_api_token_and_session_open_nothing(owner):
    key = Token.objects.create(user=owner).key
    by_token = Client(headers={"Authorization": f"Token {key}"})
    session = signed_in(owner)
    assert by_token.get("/api/v1/workloads/").status_code == 200
    deactivated(owner)
    assert by_token.get("/api/v1/workloads/").status_code == 401
    assert post(by_token, f"{API}/tokens/", {"labels": ["gpu.h100"]}).status_code == 401
    assert post(session, f"{API}/tokens/", {"labels": ["gpu.h100"]}).status_code in (401, 403)
    assert not RegistrationToken.objects.exists() and not CertificationRun.objects.exists()
