"""Requests to addresses users give us (webhooks): public addresses only, checked when we connect.

A user-given URL must never reach SpecHub's own network: loopback, private, link-local (the
cloud metadata address), CGNAT, multicast, unspecified or reserved addresses, in IPv4, IPv6
or IPv4-mapped IPv6. Names are resolved at send time and the request goes to the address
that was checked, with the name kept for the Host header and TLS, so a name that resolves
elsewhere a second time (DNS rebinding) cannot slip through. Operators may allow named
internal hosts (SPECHUB_WEBHOOK_ALLOWED_HOSTS).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from urllib.parse import urlsplit

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
SCHEMES = ("http", "https")


class RefusedAddress(ValueError):
    """The URL names, or resolves to, an address SpecHub does not send to."""


class Unresolved(RefusedAddress):
    """The URL's host name does not resolve (now)."""


def _unwrapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_public(address: IPAddress) -> bool:
    """Return whether `address` is a global unicast address (what a webhook may reach)."""
    address = _unwrapped(address)
    return address.is_global and not address.is_multicast


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """Return every address `host` resolves to (a literal address resolves to itself)."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Unresolved(f"The host {host[:100]!r} does not resolve ({exc}).") from None
    return list(dict.fromkeys(ipaddress.ip_address(str(answer[4][0]).split("%")[0]) for answer in answers))


def _host_and_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise RefusedAddress("Give an http:// or https:// URL with a host name.")
    try:
        return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise RefusedAddress("The port is not a number between 0 and 65535.") from None


def url_refusal(url: str, allowed_hosts: Collection[str]) -> str | None:
    """Return why SpecHub will not send to `url` (checked when it is registered), or None."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        return "Remove the user:password@ part; deliveries are authenticated by their signature, not by the URL."
    try:
        pinned_address(url, allowed_hosts)
    except Unresolved:
        return None  # a name that does not resolve yet is checked again at every delivery
    except RefusedAddress as refused:
        return str(refused)
    return None


def pinned_address(url: str, allowed_hosts: Collection[str]) -> IPAddress | None:
    """Resolve the URL's host now and return the address to connect to; None for an allowed internal host.

    Raises RefusedAddress unless every address the name resolves to is public.
    """
    host, port = _host_and_port(url)
    if host.lower() in allowed_hosts:
        return None
    addresses = resolve(host, port)
    refused = [str(address) for address in addresses if not is_public(address)]
    if refused or not addresses:
        raise RefusedAddress(
            f"{host} resolves to {', '.join(refused) or 'nothing'}: SpecHub only sends to public addresses "
            "(not loopback, private, link-local, CGNAT, multicast or unspecified ones)."
        )
    return addresses[0]


# A receiver's answer is read no further than this: only its status matters.
MAX_ANSWER_BYTES = 64 * 1024


def post(url: str, *, content: bytes, headers: dict[str, str], timeout: float, allowed_hosts: Collection[str]) -> int:
    """POST to `url` at the address checked just now, without its userinfo; return the answer's status.

    `timeout` bounds the whole exchange, not each read: a receiver that drips its answer is cut
    off when the time is up. Never follows redirects or environment proxies.
    """
    address = pinned_address(url, allowed_hosts)
    parts = urlsplit(url)
    target = httpx.URL(url).copy_with(userinfo=b"")  # never sent on as a Basic Authorization header
    extensions: dict[str, str] = {}
    if address is not None:
        target = target.copy_with(host=str(address))
        headers = {**headers, "Host": parts.netloc.rpartition("@")[2]}
        extensions["sni_hostname"] = parts.hostname or ""
    client = httpx.Client(timeout=timeout, trust_env=False, follow_redirects=False)
    exchange = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhook")
    answer = exchange.submit(
        _exchange, client, httpx.Request("POST", target, content=content, headers=headers, extensions=extensions)
    )
    try:
        return answer.result(timeout=timeout)
    except FutureTimeout:
        raise httpx.TimeoutException(f"no complete answer within {timeout} s") from None
    finally:
        client.close()  # also ends an exchange still running: its connection closes under it
        exchange.shutdown(wait=False)


def _exchange(client: httpx.Client, request: httpx.Request) -> int:
    response = client.send(request, stream=True)
    try:
        read = 0
        for chunk in response.iter_raw():
            read += len(chunk)
            if read > MAX_ANSWER_BYTES:
                break
        return response.status_code
    finally:
        response.close()
