"""Webhook signatures, the Standard Webhooks way, so receivers verify with an off-the-shelf library.

Every delivery carries `webhook-id` (the same on every retry of it), `webhook-timestamp` and
`webhook-signature` ("v1," + base64 HMAC-SHA256 over "id.timestamp.body"), signed by the
`standardwebhooks` package; a receiver checks them with `Webhook(secret).verify(body, headers)`
in any language's Standard Webhooks library, which also refuses old timestamps.

Secrets are `whsec_` + base64 of 32 random bytes. Endpoints made before this have a hex secret;
its bytes are the key, and `standard_secret` gives the `whsec_` form a library takes.

The older `X-SpecHub-Signature: t=<unix seconds>,v1=<hex>` header is still sent, checked by
`signature_valid`, for receivers written against it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook

SIGNATURE_HEADER = "X-SpecHub-Signature"
EVENT_HEADER = "X-SpecHub-Event"
DELIVERY_HEADER = "X-SpecHub-Delivery"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """Return the signature header's value for `body` sent at `timestamp`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def signature_valid(secret: str, header: str, body: bytes, *, now: int, tolerance: int = 300) -> bool:
    """Return whether `header` signs `body` with `secret` within `tolerance` seconds of `now`."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    if abs(now - timestamp) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), f"t={timestamp},v1={parts.get('v1', '')}")


SECRET_PREFIX = "whsec_"  # noqa: S105  # the format's prefix, not a secret


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def standard_secret(secret: str) -> str:
    """Return `secret` in the `whsec_` form Standard Webhooks libraries take (older hex secrets included)."""
    return secret if secret.startswith(SECRET_PREFIX) else SECRET_PREFIX + base64.b64encode(secret.encode()).decode()


def standard_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Return the three Standard Webhooks headers for `body`, signed by the `standardwebhooks` package."""
    signed = Webhook(standard_secret(secret)).sign(message_id, datetime.fromtimestamp(timestamp, UTC), body.decode())
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp), "webhook-signature": signed}
