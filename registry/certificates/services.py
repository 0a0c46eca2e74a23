"""Writes for certificates: issuing a signed one when a run finishes, and noting expiry."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from kernel import certificates, result
from kernel.spec import inputs_of
from registry.fleet.selectors import measured_on
from registry.models import Certificate, CertificationRun, EntryKind, Verdict
from registry.runs.selectors import run_document
from registry.transparency.services import log_append

REPRODUCE = "python -m workers reproduce certificate.json --out reproduced.json"


def verifying_key() -> Ed25519PublicKey:
    """Return the public key that verifies this deployment's certificates (all the web tier holds)."""
    if settings.SPECHUB_SIGNING_PUBLIC_KEY:
        return certificates.public_key_from_text(settings.SPECHUB_SIGNING_PUBLIC_KEY)
    return signing_key().public_key()


def signing_key_held() -> bool:
    """Return whether this process can sign: it holds the key, or makes its own (local use), as `signing_key` does."""
    return bool(settings.SPECHUB_SIGNING_KEY) or not settings.SPECHUB_SIGNING_PUBLIC_KEY


def signing_key() -> Ed25519PrivateKey:
    """Return the key certificates are signed with: from settings, or made once in the key file (local use).

    A process given only the public key (the web tier) cannot sign, and says so.
    """
    if settings.SPECHUB_SIGNING_KEY:
        return certificates.private_key_from_seed(settings.SPECHUB_SIGNING_KEY)
    if settings.SPECHUB_SIGNING_PUBLIC_KEY:
        raise ImproperlyConfigured("This process holds only SPECHUB_SIGNING_PUBLIC_KEY; certificates are signed by workers.")
    path = settings.SPECHUB_SIGNING_KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:  # O_EXCL: two processes starting at once keep the first key, never a mix
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(descriptor, "w") as key_file:
                key_file.write(certificates.new_seed())
    return certificates.private_key_from_seed(path.read_text())


def certificate_payload(
    *, run: CertificationRun, document: result.ResultDocument, verdict: result.Verdict, issued_at: datetime
) -> certificates.Payload:
    """Return what a certificate states about a finished run, pinned by sha."""
    inputs = inputs_of(document["spec"])
    return {
        "format": certificates.FORMAT,
        "serial": run.pk,
        "issuer": settings.SPECHUB_PUBLIC_URL,
        "issued_at": issued_at.isoformat(),
        "expires_at": (issued_at + timedelta(days=settings.SPECHUB_CERTIFICATE_DAYS)).isoformat(),
        "verdict": verdict["verdict"],
        "reasons": verdict["reasons"],
        "thresholds": verdict["thresholds"],
        "inputs": inputs,
        "environment": run.environment,
        "results": result.certified_results(document),
        "reproduce": REPRODUCE,
        "properties": verdict.get("properties"),
        "qualification": verdict.get("qualification"),
        "measured_on": measured_on(run),
    }


def certificate_issue(*, run: CertificationRun) -> Certificate | None:
    """Sign and store the certificate of a finished run (again, after it is judged again); None without a verdict."""
    document = run_document(run)
    verdict = result.verdict(document)
    if document is None or verdict is None:
        return None
    issued_at = timezone.now().replace(microsecond=0)
    payload = certificate_payload(run=run, document=document, verdict=verdict, issued_at=issued_at)
    key = signing_key()
    data = certificates.sign(payload, key)
    signed = certificates.verify(data, key.public_key())  # never store a certificate that would not verify
    # A run judged again (its engine build qualified) replaces its certificate with one that cites the qualification;
    # both files stay in the log. The row and its entry are written together or not at all.
    with transaction.atomic():
        revoked = Certificate.objects.select_for_update().filter(run=run, revoked_at__isnull=False).first()
        if revoked is not None:  # a revocation is final: judged again, the run is not signed anew, nor its file changed
            return revoked
        certificate = _certificate_store(run=run, payload=payload, data=data, signed=signed, issued_at=issued_at)
        log_append(kind=EntryKind.CERTIFICATE, certificate=certificate, entry=data, key=key)
    return certificate


def _certificate_store(
    *, run: CertificationRun, payload: certificates.Payload, data: bytes, signed: certificates.Verified, issued_at: datetime
) -> Certificate:
    certificate, _ = Certificate.objects.update_or_create(
        run=run,
        defaults=dict(
            pair=run.pair,
            verdict=payload["verdict"],
            thresholds=payload["thresholds"],
            digest=signed.digest,
            key_id=signed.key_id,
            signature=signed.signature,
            document=data.decode(),
            issued_at=issued_at,
            expires_at=issued_at + timedelta(days=settings.SPECHUB_CERTIFICATE_DAYS),
            expired_at=None,
            reproduce=REPRODUCE,
        ),
    )
    return certificate


def certificates_log_backfill() -> int:
    """Append each certificate whose current file has no log entry (issued before the log), oldest first; return how many."""
    key, appended = signing_key(), 0
    for certificate in Certificate.objects.filter(log_entries__isnull=True).order_by("issued_at", "id"):
        with transaction.atomic():
            log_append(kind=EntryKind.CERTIFICATE, certificate=certificate, entry=certificate.document.encode(), key=key)
        appended += 1
    return appended


def certificates_expire(*, now: datetime | None = None) -> list[Certificate]:
    """Mark each pair's newest certificate that has lapsed as expired, once; return those newly marked."""
    now = now or timezone.now()
    lapsed = Certificate.objects.filter(expires_at__lte=now, expired_at__isnull=True).select_related("pair")
    marked = []
    for certificate in lapsed:
        certificate.expired_at = now
        certificate.save(update_fields=["expired_at"])
        if certificate.pair.latest_run_id == certificate.run_id:
            certificate.pair.verdict = Verdict.EXPIRED
            certificate.pair.save(update_fields=["verdict"])
            marked.append(certificate)
    return marked
