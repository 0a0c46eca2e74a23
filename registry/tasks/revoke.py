"""The revocation the web tier queues: it holds no signing key, and logging a revocation signs a checkpoint."""

from __future__ import annotations

from registry.celery import app
from registry.certificates.revocation import REVOKE_TASK, certificate_revoke_queued


# No retry of its own: a failure leaves the certificate unrevoked, as the page and the API still show, to ask again;
# a worker lost mid-task gives the message back (task_reject_on_worker_lost), and a second run revokes nothing twice.
@app.task(name=REVOKE_TASK)
def revoke_certificate(certificate_id: int, user_id: int, reason: str) -> str:
    """Revoke a certificate on behalf of `user_id`, where the signing key is; say what came of it."""
    return certificate_revoke_queued(certificate_id=certificate_id, user_id=user_id, reason=reason)
