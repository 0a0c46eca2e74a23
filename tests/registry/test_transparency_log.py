"""Issue 55: every signed certificate and every revocation in an append-only Merkle log, with signed checkpoints,
proofs served to anyone, and revocation by staff or a private certificate's owner. Issue 61: a revocation names every
file signed for the run, the entries are served for a monitor to read, and a reason is plain text."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from kernel import certificates
from kernel.transparency import audit, checkpoint, entries, merkle, note
from registry.catalog.selectors import export_rows, recommendations
from registry.celery import app
from registry.certificates import revocation
from registry.certificates.revocation import certificate_revoke
from registry.certificates.services import certificate_issue, signing_key
from registry.models import (
    Certificate,
    CertificationRun,
    EntryKind,
    LogEntry,
    LogHead,
    Submission,
    WebhookDelivery,
    Workload,
)
from registry.notifications.services import webhook_endpoint_create
from registry.transparency.selectors import log_checkpoint, log_tree
from registry.transparency.services import log_append, log_origin
from tests.support.factories import PairFactory
from tests.support.processes import process_env, worker_database_url
from tests.support.runs import finish_run

pytestmark = pytest.mark.django_db


def certified(**figures: float) -> Certificate:
    return finish_run(PairFactory.create(), verdict="certified", **figures).certificate  # type: ignore[arg-type]


def opened(signed: str) -> checkpoint.Checkpoint:
    return checkpoint.open_checkpoint(signed, log_origin(), signing_key().public_key())


def proof_of(data: bytes) -> entries.EntryProof:
    answer = APIClient().get("/api/v1/log/proof/inclusion", {"certificate": hashlib.sha256(data).hexdigest()})
    assert answer.status_code == 200, answer.content
    return answer.json()  # type: ignore[no-any-return]


def included(data: bytes) -> audit.Included:
    return audit.check_inclusion(data, proof_of(data), origin=log_origin(), key=signing_key().public_key())


@pytest.mark.both_databases
def test_each_signed_certificate_is_appended_under_a_signed_checkpoint_and_a_rejudged_one_again(settings):
    first, second = certified(), certified()
    assert list(LogEntry.objects.values_list("index", "kind", "certificate_id")) == [
        (0, "certificate", first.pk), (1, "certificate", second.pk)
    ]  # fmt: skip
    old_file = first.document.encode()
    settings.SPECHUB_CERTIFICATE_DAYS += 1  # so the new file differs within the same second
    certificate_issue(run=first.run)  # judged again: a new file replaces the row's, and both are logged
    first.refresh_from_db()
    latest = opened(log_checkpoint())
    assert (latest.origin, latest.size, LogHead.objects.get().size) == (log_origin(), 3, 3)
    assert latest.root == log_tree().tree.root() == bytes(LogEntry.objects.get(index=2).root_hash)
    assert included(old_file).index == 0 and included(first.document.encode()).index == 2
    assert included(second.document.encode()).checkpoint == latest


@pytest.mark.both_databases
def test_a_certificate_and_its_entry_are_written_together_or_not_at_all(monkeypatch):
    certified()
    run = finish_run(PairFactory.create())
    LogEntry.objects.filter(certificate__run=run).delete()
    Certificate.objects.filter(run=run).delete()

    def killed(**_: object) -> None:
        raise SystemExit("the worker died between the certificate and its entry")

    monkeypatch.setattr("registry.certificates.services.log_append", killed)
    with pytest.raises(SystemExit):
        certificate_issue(run=run)
    assert not Certificate.objects.filter(run=run).exists() and LogEntry.objects.count() == 1


def test_the_api_serves_checkpoints_and_proofs_and_refuses_hostile_parameters_with_reasons():
    logged = [certified() for _ in range(3)]
    web = APIClient()
    answer = web.get("/api/v1/log/checkpoint").json()
    assert answer["size"] == 3 and opened(answer["checkpoint"]).size == 3
    assert answer["verifier_key"] == note.verifier_key(log_origin(), signing_key().public_key())
    plain = web.get("/api/v1/log/checkpoint", HTTP_ACCEPT="text/plain")
    assert plain["Content-Type"].startswith("text/plain") and plain.content.decode() == answer["checkpoint"]
    by_id = web.get("/api/v1/log/proof/inclusion", {"certificate": logged[1].pk}).json()
    assert by_id["inclusion"]["index"] == 1 and by_id["entry_sha256"] == hashlib.sha256(logged[1].document.encode()).hexdigest()
    older = web.get("/api/v1/log/proof/inclusion", {"certificate": logged[0].pk, "size": 2}).json()["inclusion"]
    tree = log_tree().tree
    merkle.verify_inclusion(tree.leaf(0), 0, 2, entries.hashes(older["proof"]), tree.root(2))
    proof = web.get("/api/v1/log/proof/consistency", {"from": 1, "to": 3}).json()
    merkle.verify_consistency(1, 3, tree.root(1), tree.root(3), entries.hashes(proof["proof"]))
    refused = {
        ("inclusion", "certificate=x"): 400, ("inclusion", "certificate="): 400, ("inclusion", f"certificate={'f' * 64}"): 404,
        ("inclusion", f"certificate={logged[0].pk}&size=0"): 400, ("inclusion", f"certificate={logged[2].pk}&size=2"): 400,
        ("inclusion", f"certificate={logged[0].pk}&size=99"): 400, ("inclusion", "certificate=99999"): 404,
        ("consistency", "from=2&to=1"): 400, ("consistency", "from=%C2%B2"): 400, ("consistency", "from=1&to=1e3"): 400,
        ("consistency", ""): 400, ("consistency", f"from={'9' * 5000}"): 400, ("inclusion", f"certificate={'9' * 64}"): 404,
    }  # fmt: skip
    for (which, query), status in refused.items():
        found = web.get(f"/api/v1/log/proof/{which}?{query}")
        assert found.status_code == status and found.json()["error"]["message"], (which, query, found.content[:300])


def test_a_download_carries_its_index_and_an_inclusion_proof_against_a_checkpoint():
    certified()
    certificate = certified()
    answer = APIClient().get(f"/api/v1/certificates/{certificate.pk}/download/")
    assert answer.content == certificate.document.encode()  # the body is still the signed file, byte for byte
    signed = base64.b64decode(answer["SpecHub-Log-Checkpoint"]).decode()
    proof = [base64.b64decode(node) for node in answer["SpecHub-Log-Proof"].split(",")]
    index, size = int(answer["SpecHub-Log-Index"]), int(answer["SpecHub-Log-Size"])
    merkle.verify_inclusion(entries.entry_leaf(answer.content), index, size, proof, opened(signed).root)
    assert (index, size) == (1, 2)


def test_a_certificate_whose_bytes_changed_after_logging_fails_inclusion():
    certificate = certified()
    logged = certificate.document.encode()
    answer = proof_of(logged)
    payload = certificates.payload_of(logged)
    payload["verdict"] = "certified"
    payload["reasons"] = ["a better figure, signed again by a careless registry"]
    changed = certificates.sign(payload, signing_key())
    certificates.verify(changed, signing_key().public_key())  # the signature alone still holds
    Certificate.objects.filter(pk=certificate.pk).update(document=changed.decode())
    with pytest.raises(merkle.ProofError, match="another entry"):
        audit.check_inclusion(changed, answer, origin=log_origin(), key=signing_key().public_key())
    forged: entries.EntryProof = {**answer, "entry_sha256": hashlib.sha256(changed).hexdigest()}
    with pytest.raises(merkle.ProofError, match="not in the log"):
        audit.check_inclusion(changed, forged, origin=log_origin(), key=signing_key().public_key())
    assert APIClient().get("/api/v1/log/proof/inclusion", {"certificate": forged["entry_sha256"]}).status_code == 404


def _seen_then_next(tamper: object) -> tuple[checkpoint.Checkpoint, checkpoint.Checkpoint, entries.ConsistencyProof | None]:
    for _ in range(5):
        certified()
    seen = opened(log_checkpoint())
    tamper()  # type: ignore[operator]
    certified()  # the next certificate signs the next checkpoint
    latest = opened(log_checkpoint())
    proof = None
    if seen.size < latest.size:
        proof = APIClient().get("/api/v1/log/proof/consistency", {"from": seen.size, "to": latest.size}).json()
    return seen, latest, proof


@pytest.mark.both_databases
def test_a_certificate_row_deleted_makes_the_next_checkpoint_inconsistent_with_the_one_a_client_saw():
    def delete_row() -> None:  # as someone who wanted it gone would: its entry with it, behind the registry's back
        with connection.cursor() as cursor:
            victim = Certificate.objects.order_by("id")[2]
            cursor.execute("DELETE FROM registry_logentry WHERE certificate_id = %s", [victim.pk])
            cursor.execute("DELETE FROM registry_certificate WHERE id = %s", [victim.pk])

    seen, latest, proof = _seen_then_next(delete_row)
    assert latest.size == seen.size  # one gone, one added
    with pytest.raises(merkle.ProofError, match="rewritten"):
        audit.check_consistency(seen, latest, proof)


def test_a_log_rebuilt_with_one_entry_replaced_fails_consistency():
    def replace_entry() -> None:  # and rebuild the log from there, each entry's root with it, as a rebuild would
        forged = b"a certificate with a better figure"
        LogEntry.objects.filter(index=1).update(entry=forged, entry_sha256=entries.entry_sha256(forged),
                                                leaf_hash=entries.entry_leaf(forged))  # fmt: skip
        rebuilt = merkle.Tree()
        for entry in LogEntry.objects.order_by("index"):
            rebuilt.append(bytes(entry.leaf_hash))
            LogEntry.objects.filter(pk=entry.pk).update(root_hash=rebuilt.root())

    seen, latest, proof = _seen_then_next(replace_entry)
    assert latest.size == seen.size + 1
    with pytest.raises(merkle.ProofError, match="does not begin with the log of size 5"):
        audit.check_consistency(seen, latest, proof)


def test_a_revoked_certificates_run_judged_again_is_not_signed_anew(settings):
    certificate = certified()
    certificate_revoke(certificate_id=certificate.pk, user=User.objects.create_user("staff", is_staff=True), reason="bad")
    size, document = LogHead.objects.get().size, Certificate.objects.get(pk=certificate.pk).document
    settings.SPECHUB_CERTIFICATE_DAYS += 1  # a new file would differ
    assert certificate_issue(run=certificate.run).pk == certificate.pk  # type: ignore[union-attr]
    assert (LogHead.objects.get().size, Certificate.objects.get(pk=certificate.pk).document) == (size, document)


@pytest.fixture
def staff() -> User:
    return User.objects.create_user("staff", is_staff=True)


def test_staff_revoke_with_a_reason_logged_shown_sent_and_never_recommended(staff, settings):
    certificate = certified(speedup=1.9)
    other = finish_run(PairFactory.create(verifier=certificate.pair.verifier), speedup=1.2).certificate
    owner = User.objects.create_user("author")
    Submission.objects.create(submitted_by=owner, repo_id=certificate.pair.draft.repo_id, revision="a" * 40,  # type: ignore[union-attr]
                              pair=certificate.pair, status="accepted")  # fmt: skip
    webhook_endpoint_create(owner=owner, url="https://hooks.example.org/spechub", events=[])
    verifier = certificate.pair.verifier.repo_id
    assert recommendations(verifier=verifier, hardware="cpu", concurrency=1)[0]["pair"] == certificate.pair_id

    api = APIClient()
    api.force_authenticate(staff)
    answer = api.post(f"/api/v1/certificates/{certificate.pk}/revoke/", {"reason": "the baseline server was misconfigured"})
    assert answer.status_code == 200 and answer.json()["revocation_reason"] == "the baseline server was misconfigured"
    again = api.post(f"/api/v1/certificates/{certificate.pk}/revoke/", {"reason": "twice"})
    assert again.status_code == 409 and "revoked already" in again.json()["error"]["message"]

    seen = included(certificate.document.encode())
    assert seen.revocation is not None and seen.revocation["reason"] == "the baseline server was misconfigured"
    assert seen.revocation["revoked_by"] == "staff" and LogEntry.objects.filter(kind="revocation").count() == 1
    delivery = WebhookDelivery.objects.get(event="certificate.revoked")
    assert '"reason":"the baseline server was misconfigured"' in delivery.body
    ranked = recommendations(verifier=verifier, hardware="cpu", concurrency=1)
    assert [r["pair"] for r in ranked] == [other.pair_id]
    row = next(r for r in export_rows() if r["pair"] == certificate.pair_id)
    assert row["revocation_reason"] == "the baseline server was misconfigured" and row["revoked_at"]
    shown = APIClient().get(f"/api/v1/pairs/{certificate.pair_id}/").json()["certificate"]
    assert shown["revoked_at"] and shown["revocation_reason"] == "the baseline server was misconfigured"
    page = APIClient().get(f"/pairs/{certificate.pair_id}/")
    assert b"Revoked" in page.content and b"the baseline server was misconfigured" in page.content


def test_staff_revoke_from_the_pair_page_and_others_may_not(staff, client):
    certificate = certified()
    client.force_login(staff)
    assert b'name="reason"' in client.get(f"/pairs/{certificate.pair_id}/").content
    assert client.post(f"/certificates/{certificate.pk}/revoke/", {"reason": ""}).status_code == 400
    done = client.post(f"/certificates/{certificate.pk}/revoke/", {"reason": "a misconfigured baseline"})
    assert done.status_code == 302 and Certificate.objects.get(pk=certificate.pk).revocation_reason == "a misconfigured baseline"
    client.force_login(User.objects.create_user("someone"))
    assert client.post(f"/certificates/{certified().pk}/revoke/", {"reason": "no"}).status_code == 403


def test_only_staff_or_the_owner_of_a_private_certificate_may_revoke_and_a_reason_is_required(staff):
    public, private = certified(), certified()
    owner, stranger = User.objects.create_user("owner"), User.objects.create_user("stranger")
    workload = Workload.objects.create(owner=owner, name="mine", verifier=private.pair.verifier, sha256="0" * 64,
                                       format="text", total_requests=1, unique_requests=1)  # fmt: skip
    CertificationRun.objects.filter(pk=private.run_id).update(workload=workload)
    api = APIClient()
    api.force_authenticate(owner)
    assert api.post(f"/api/v1/certificates/{public.pk}/revoke/", {"reason": "mine?"}).status_code == 403
    assert api.post(f"/api/v1/certificates/{private.pk}/revoke/", {"reason": ""}).status_code == 400
    assert api.post(f"/api/v1/certificates/{private.pk}/revoke/", {"reason": "x" * 5000}).status_code == 400
    assert APIClient().post(f"/api/v1/certificates/{public.pk}/revoke/", {"reason": "anonymous"}).status_code in (401, 403)
    api.force_authenticate(stranger)
    assert api.post(f"/api/v1/certificates/{private.pk}/revoke/", {"reason": "not mine"}).status_code == 404
    api.force_authenticate(owner)
    assert api.post(f"/api/v1/certificates/{private.pk}/revoke/", {"reason": "my workload was wrong"}).status_code == 200
    with pytest.raises(Exception, match="Only staff"):
        certificate_revoke(certificate_id=public.pk, user=stranger, reason="no")
    assert certificate_revoke(certificate_id=public.pk, user=staff, reason="yes").revoked_by == staff


def test_staff_revoke_from_the_admin_after_giving_a_reason(staff, client):
    staff.is_superuser = True
    staff.save()
    certificate = certified()
    client.force_login(staff)
    asked = client.post("/admin/registry/certificate/", {"action": "revoke", "_selected_action": [certificate.pk]})
    assert asked.status_code == 200 and b'name="reason"' in asked.content
    done = client.post("/admin/registry/certificate/", {"action": "revoke", "_selected_action": [certificate.pk],
                                                        "reason": "withdrawn by staff"})  # fmt: skip
    assert done.status_code == 302 and Certificate.objects.get(pk=certificate.pk).revocation_reason == "withdrawn by staff"
    entry = LogEntry.objects.get(kind="revocation")  # the log reads in the admin, and nothing there may change it
    assert b"withdrawn by staff" in client.get(f"/admin/registry/logentry/{entry.pk}/change/").content
    assert client.get("/admin/registry/logentry/add/").status_code == 403
    assert client.post(f"/admin/registry/logentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403


def web_tier() -> override_settings:
    """The web tier of a deployment: it holds only the public key (docker-compose.yml), so it cannot sign."""
    return override_settings(
        SPECHUB_SIGNING_KEY="", SPECHUB_SIGNING_PUBLIC_KEY=certificates.public_key_text(signing_key().public_key())
    )


def broker_down(*_: object, **__: object) -> None:
    raise OSError("the broker is down")


def test_the_web_tier_queues_a_revocation_for_a_signing_worker_which_logs_it_once(staff, client, monkeypatch):
    certificate = certified()
    sent: list[tuple[str, tuple[object, ...], dict[str, object]]] = []
    monkeypatch.setattr(revocation, "task_send", lambda name, *args, **options: sent.append((name, args, options)))
    api = APIClient()
    api.force_authenticate(staff)
    client.force_login(staff)
    with web_tier(), monkeypatch.context() as broker:
        broker.setattr(revocation, "task_send", broker_down)
        down = api.post(f"/api/v1/certificates/{certificate.pk}/revoke/", {"reason": "a misconfigured baseline"})
        assert down.status_code == 503 and "nothing was revoked" in down.json()["error"]["message"]
    with web_tier():
        answer = api.post(f"/api/v1/certificates/{certificate.pk}/revoke/", {"reason": "a misconfigured baseline"})
        assert answer.status_code == 202, answer.content
        assert answer.json()["queued"] and f"/api/v1/certificates/{certificate.pk}/" in answer.json()["message"]
        assert api.post(f"/api/v1/certificates/{certificate.pk}/revoke/", {"reason": " "}).status_code == 400
        page = client.post(f"/certificates/{certificate.pk}/revoke/", {"reason": "asked twice"}, follow=True)
        assert page.status_code == 200 and b"Revocation queued" in page.content
    assert [(name, options) for name, _, options in sent] == [("registry.revoke_certificate", {"queue": "default"})] * 2
    assert Certificate.objects.get(pk=certificate.pk).revoked_at is None and not LogEntry.objects.filter(kind="revocation")

    outcomes = [app.tasks[name].apply(args=args).get() for name, args, _ in sent]  # where the key is
    assert outcomes == ["revoked", "revoked already"] and LogEntry.objects.filter(kind="revocation").count() == 1
    assert Certificate.objects.get(pk=certificate.pk).revocation_reason == "a misconfigured baseline"
    with web_tier():
        again = api.post(f"/api/v1/certificates/{certificate.pk}/revoke/", {"reason": "once more"})
    assert again.status_code == 409 and "revoked already" in again.json()["error"]["message"] and len(sent) == 2


def test_a_queued_revocation_run_twice_or_no_longer_allowed_logs_nothing_more(staff):
    certificate, kept = certified(), certified()
    for _ in range(2):  # a message delivered twice, or two requests queued before the first ran
        revocation.certificate_revoke_queued(certificate_id=certificate.pk, user_id=staff.pk, reason="withdrawn")
    assert LogEntry.objects.filter(kind="revocation", certificate=certificate).count() == 1
    User.objects.filter(pk=staff.pk).update(is_staff=False)  # staff no more by the time the worker runs it
    assert revocation.certificate_revoke_queued(certificate_id=kept.pk, user_id=staff.pk, reason="late") == "refused"
    assert Certificate.objects.get(pk=kept.pk).revoked_at is None and LogEntry.objects.filter(kind="revocation").count() == 1


KILLED_MIDWAY = """
import os, signal, sys
import django
django.setup()
from registry.certificates import services
from registry.models import CertificationRun

def killed(**_):  # the certificate's row is written; the worker dies before its entry
    os.kill(os.getpid(), signal.SIGKILL)

services.log_append = killed
services.certificate_issue(run=CertificationRun.objects.get(pk=int(sys.argv[1])))
"""


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_between_the_certificate_and_its_entry_leaves_neither():
    run = finish_run(PairFactory.create())
    LogEntry.objects.all().delete()
    LogHead.objects.all().delete()
    Certificate.objects.all().delete()
    env = process_env({"DATABASE_URL": worker_database_url(), "DJANGO_SETTINGS_MODULE": "registry.settings"})
    child = subprocess.run([sys.executable, "-c", KILLED_MIDWAY, str(run.pk)], env=env, timeout=180, capture_output=True)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    assert not Certificate.objects.exists() and not LogEntry.objects.exists()
    certificate_issue(run=run)  # the redelivered task then writes both
    assert Certificate.objects.get(run=run).log_entries.count() == 1


def test_certificates_issued_before_the_log_are_appended_once_by_log_backfill():
    from django.core.management import call_command

    older, newer = certified(), certified()
    LogEntry.objects.all().delete()  # as if both were issued before the log existed
    LogHead.objects.all().delete()
    call_command("log_backfill", stdout=open(os.devnull, "w"))  # noqa: SIM115 - closed with the process
    call_command("log_backfill", stdout=open(os.devnull, "w"))  # noqa: SIM115
    after = certified()
    assert [included(c.document.encode()).index for c in (older, newer, after)] == [0, 1, 2]


def test_revoking_a_run_judged_again_names_both_its_files_and_each_reads_revoked(staff, settings):
    certificate = certified()
    older = certificate.document.encode()
    settings.SPECHUB_CERTIFICATE_DAYS += 1  # so the new file differs within the same second
    certificate_issue(run=certificate.run)  # judged again: a second file, and the first stays in the log
    certificate.refresh_from_db()
    newer = certificate.document.encode()
    certificate_revoke(certificate_id=certificate.pk, user=staff, reason="the baseline server was misconfigured")
    logged = bytes(LogEntry.objects.get(kind="revocation").entry).decode()
    named = entries.revocation_read(logged)["certificate_sha256s"]
    assert named == [hashlib.sha256(older).hexdigest(), hashlib.sha256(newer).hexdigest()]
    for data in (older, newer):
        seen = included(data)
        assert seen.revocation is not None and seen.revocation["reason"] == "the baseline server was misconfigured", data


def test_a_revocation_logged_in_the_first_format_is_still_served_with_the_file_it_names(staff):
    certificate = certified()
    named = entries.entry_sha256(certificate.document.encode())
    statement = {"format": entries.REVOCATION_FORMAT_V1, "certificate_sha256": named,
                 "serial": certificate.run_id, "reason": "revoked before /2", "revoked_by": "staff",
                 "revoked_at": "2026-12-01T00:00:00+00:00"}  # fmt: skip
    log_append(kind=EntryKind.REVOCATION, certificate=certificate, key=signing_key(),
               entry=json.dumps(statement, sort_keys=True, separators=(",", ":")).encode())  # fmt: skip
    Certificate.objects.filter(pk=certificate.pk).update(revoked_at=timezone.now(), revoked_by=staff)
    seen = included(certificate.document.encode())
    assert seen.revocation is not None and seen.revocation["reason"] == "revoked before /2"


def test_the_log_serves_its_entries_in_order_and_withholds_a_private_workloads_certificate(staff):
    public, private = certified(), certified()
    workload = Workload.objects.create(owner=User.objects.create_user("owner"), name="mine", verifier=private.pair.verifier,
                                       sha256="0" * 64, format="text", total_requests=1, unique_requests=1)  # fmt: skip
    CertificationRun.objects.filter(pk=private.run_id).update(workload=workload)
    certificate_revoke(certificate_id=public.pk, user=staff, reason="withdrawn")
    web = APIClient()
    page = web.get("/api/v1/log/entries", {"start": 0}).json()
    assert page["start"] == 0 and [e["kind"] for e in page["entries"]] == ["certificate", "certificate", "revocation"]
    shown = [None if e["entry"] is None else base64.b64decode(e["entry"]) for e in page["entries"]]
    assert shown[0] == public.document.encode() and shown[1] is None  # the private certificate: its SHA-256 alone
    assert entries.revocation_read(shown[2].decode())["certificate_sha256s"] == [page["entries"][0]["entry_sha256"]]  # type: ignore[union-attr]
    tree = log_tree().tree
    leaves = [merkle.leaf_hash(bytes.fromhex(e["entry_sha256"])) if data is None else entries.entry_leaf(data)
              for e, data in zip(page["entries"], shown, strict=True)]  # fmt: skip
    assert leaves == [tree.leaf(i) for i in range(3)]
    assert [e["index"] for e in web.get("/api/v1/log/entries", {"start": 1, "end": 2}).json()["entries"]] == [1]
    for query in ("start=3", "start=0&end=4", "start=x", "", "start=-1", "start=1&end=1"):
        refused = web.get(f"/api/v1/log/entries?{query}")
        assert refused.status_code == 400 and refused.json()["error"]["message"], (query, refused.content[:300])
    LogEntry.objects.all().delete()
    LogHead.objects.all().delete()
    assert web.get("/api/v1/log/entries", {"start": 0}).status_code == 404


@pytest.mark.parametrize("reason", ["a NUL \x00 in it", "\x1b[2J\x1b]0;owned\x07 a terminal escape", "gnp\u202e.exe"])
def test_a_reason_that_is_not_plain_text_is_refused_by_the_page_and_the_api_and_nothing_is_revoked(reason, staff, client):
    certificate = certified()
    client.force_login(staff)
    page = client.post(f"/certificates/{certificate.pk}/revoke/", {"reason": reason})
    assert page.status_code == 400 and b"control character" in page.content and b"plain text" in page.content, page.content
    api = APIClient()
    api.force_authenticate(staff)
    assert api.post(f"/api/v1/certificates/{certificate.pk}/revoke/", {"reason": reason}).status_code == 400
    assert Certificate.objects.get(pk=certificate.pk).revoked_at is None and not LogEntry.objects.filter(kind="revocation")
    # A form's line breaks (CRLF) and tabs are text.
    assert client.post(f"/certificates/{certificate.pk}/revoke/", {"reason": "first\r\nsecond\tline"}).status_code == 302
    assert Certificate.objects.get(pk=certificate.pk).revocation_reason == "first\nsecond\tline"
