"""Revoking a certificate: by staff, or by the owner of a private (own-workload) certificate, with a reason.

The certificate stays in the transparency log; the revocation is appended after it, naming the certificate file's
SHA-256, the reason, who revoked it and when, in the transaction that marks the row. `spechub verify` then says
"revoked" with the reason, the pages and the API show it, and the recommendation passes it over.

Appending signs a checkpoint, so it happens where the signing key is. The web tier of a deployment holds only the public
key: there `certificate_revoke_request` refuses what it can refuse at once (permission, the reason, a certificate revoked
already) and queues the revocation for a worker that holds the key (`registry.revoke_certificate`).
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from kernel import plain
from kernel.transparency import entries
from registry.certificates.services import signing_key, signing_key_held
from registry.dispatch import task_send
from registry.models import Certificate, EntryKind, WebhookEvent
from registry.notifications.payloads import Revoked
from registry.notifications.services import pair_event_notify
from registry.transparency.selectors import certificate_files
from registry.transparency.services import log_append

MAX_REASON = 2000
REVOKE_TASK = "registry.revoke_certificate"
# Only workers that hold the signing key take this queue (docker-compose's worker-cpu); the uploaded results a
# self-hosted worker sends, and re-judgements, are signed on it too. The notifications worker takes its own queue.
SIGNING_QUEUE = "default"

logger = logging.getLogger(__name__)


class AlreadyRevoked(Exception):
    """The certificate was revoked before; a revocation is final."""


class RevocationNotQueued(Exception):
    """The broker did not take the revocation: nothing was revoked, and asking again may succeed."""


def certificate_may_revoke(*, certificate: Certificate, user: Any) -> bool:
    """Return whether `user` may revoke `certificate`: staff any, an owner the certificates of their own workload."""
    if not getattr(user, "is_authenticated", False):
        return False
    workload = certificate.run.workload
    return bool(user.is_staff) or (workload is not None and workload.owner_id == user.pk)


def certificate_revoke_request(*, certificate_id: int, user: Any, reason: str) -> Certificate | None:
    """Revoke at once where this process can sign; elsewhere refuse what can be refused here and queue the rest.

    Return the revoked certificate, or None when the revocation was queued for a worker that holds the key.
    """
    if signing_key_held():
        return certificate_revoke(certificate_id=certificate_id, user=user, reason=reason)
    reason = _reason_checked(reason)
    _refuse_unless_revocable(Certificate.objects.select_related("run__workload").get(pk=certificate_id), user)
    try:  # sent now, not on commit: this side wrote nothing, and a broker error must reach the caller, not a 202
        task_send(REVOKE_TASK, certificate_id, user.pk, reason, queue=SIGNING_QUEUE)
    except (OperationalError, OSError) as exc:
        logger.warning("certificate %s: the broker did not take its revocation (%s)", certificate_id, exc)
        raise RevocationNotQueued("The revocation could not be queued; nothing was revoked. Try again shortly.") from exc
    return None


def certificate_revoke_queued(*, certificate_id: int, user_id: int, reason: str) -> str:
    """Run a revocation the web tier queued, where the key is; say what came of it.

    Idempotent: a message delivered twice, or a request sent twice before the first ran, revokes and logs once, since
    `certificate_revoke` checks for an earlier revocation inside its locked transaction.
    """
    user = get_user_model().objects.filter(pk=user_id).first()
    try:
        certificate_revoke(certificate_id=certificate_id, user=user, reason=reason)
    except AlreadyRevoked:
        return "revoked already"
    except (PermissionDenied, ValidationError) as refused:  # e.g. staff rights withdrawn since the request
        logger.warning("certificate %s: queued revocation refused: %s", certificate_id, refused)
        return "refused"
    return "revoked"


def _reason_checked(reason: str) -> str:
    """The reason, trimmed; refused when empty, too long, or holding a character that is not text (a NUL, which
    PostgreSQL cannot store, a terminal escape, a bidi override): it is shown to whoever verifies the file."""
    reason = reason.replace("\r\n", "\n").strip()  # a form's textarea sends its line breaks as CRLF
    if not reason or len(reason) > MAX_REASON:
        raise ValidationError(f"Give the reason for revoking, in 1 to {MAX_REASON} characters.", code="invalid")
    found = plain.first_hidden(reason, allowed="\n\t")
    if found is not None:
        raise ValidationError(f"The reason holds U+{ord(found):04X}, a control character, not text: write it as plain text "
                              "(line breaks and tabs are fine).", code="control-character")  # fmt: skip
    return reason


def _refuse_unless_revocable(certificate: Certificate, user: Any) -> None:
    if not certificate_may_revoke(certificate=certificate, user=user):
        raise PermissionDenied("Only staff, or the owner of a certificate of their own workload, may revoke it.")
    if certificate.revoked_at is not None:
        raise AlreadyRevoked(f"Certificate {certificate.pk} was revoked already, on {certificate.revoked_at:%Y-%m-%d}.")


def certificate_revoke(*, certificate_id: int, user: Any, reason: str) -> Certificate:
    """Revoke a certificate with a reason, and log the revocation; refuse one already revoked."""
    reason = _reason_checked(reason)
    key = signing_key()  # before any write: a process that cannot sign cannot log the revocation
    with transaction.atomic():
        certificate = (
            Certificate.objects.select_for_update(of=("self",)).select_related("run__workload", "pair").get(pk=certificate_id)
        )
        _refuse_unless_revocable(certificate, user)  # under the lock: two revocations at once log one
        now = timezone.now().replace(microsecond=0)
        statement: entries.Revocation = {
            "format": entries.REVOCATION_FORMAT,
            # Every file signed for the run: a run judged again has an older file in the log that must read revoked too.
            "certificate_sha256s": certificate_files(certificate=certificate),
            "serial": certificate.run_id,
            "reason": reason,
            "revoked_by": user.get_username(),
            "revoked_at": now.isoformat(),
        }
        logged = log_append(
            kind=EntryKind.REVOCATION, certificate=certificate, entry=entries.revocation_bytes(statement), key=key
        )
        certificate.revoked_at, certificate.revoked_by, certificate.revocation_reason = now, user, reason
        certificate.save(update_fields=["revoked_at", "revoked_by", "revocation_reason"])
        if certificate.run.workload_id is None:
            data: Revoked = {"certificate": certificate.pk, "certificate_digest": certificate.digest, "reason": reason,
                             "revoked_at": now.isoformat(), "log_index": logged.index}  # fmt: skip
            subject = f"certificate-{certificate.pk}-revoked"
            pair_event_notify(pair=certificate.pair, event=WebhookEvent.REVOKED, subject=subject, data=data)
    return certificate
