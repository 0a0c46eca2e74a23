"""Webhook signatures: HMAC-SHA256 over the timestamp and the exact body, Stripe-style.

Receivers check `X-SpecHub-Signature: t=<unix seconds>,v1=<hex>` with `signature_valid`,
and reject old timestamps so a captured delivery cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac

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
