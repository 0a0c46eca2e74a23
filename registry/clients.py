"""Who is asking: the client's address as the nearest trusted proxy saw it.

`X-Forwarded-For` is written by whoever sends the request, so it names the client only as far as
a proxy we run appended to it. With SPECHUB_TRUSTED_PROXIES = n (0 by default: no proxy), the
client is the n-th address from the header's right end, as DRF's NUM_PROXIES reads it for the API's
throttles; with none trusted it is the peer address. Rate limits, sign-in lockout and /metrics all
ask here, so a rotating header buys an attacker nothing anywhere.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """Return the client's address: the peer's, or the one the trusted proxies recorded."""
    peer = str(request.META.get("REMOTE_ADDR", ""))
    proxies = settings.SPECHUB_TRUSTED_PROXIES
    hops = [hop.strip() for hop in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",") if hop.strip()]
    if not proxies or not hops:
        return peer
    return hops[-min(proxies, len(hops))]


def behind_proxy() -> bool:
    """Whether a proxy we run sits in front: then every peer address is the proxy's own."""
    return bool(settings.SPECHUB_TRUSTED_PROXIES) or settings.SECURE_PROXY_SSL_HEADER is not None
