"""Webhooks never reach SpecHub's own network: every internal address class is refused, at registration and at send time."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import httpx
import pytest

from registry.models import DeliveryState, WebhookDelivery, WebhookEndpoint, WebhookEvent
from registry.notifications import outbound
from registry.notifications.services import webhook_deliver
from tests.support.receiver import webhook_receiver

INTERNAL = [
    "127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::", "169.254.169.254", "fe80::1",
    "10.0.0.1", "172.16.5.4", "192.168.1.1", "fc00::1", "fd12:3456::1", "100.64.0.1", "100.127.255.254",
    "224.0.0.1", "239.255.255.250", "ff02::1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "240.0.0.1", "255.255.255.255",
]  # fmt: skip
PUBLIC = ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]

REFUSED_URLS = [
    "http://127.0.0.1/hook",
    "http://localhost/hook",
    "http://localhost:6379/",
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://0.0.0.0:8000/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/hook",
    "http://100.64.0.1/hook",
    "http://[fe80::1]/hook",
    "https://224.0.0.1/hook",
    "http://user:pw@example.org/hook",
]


@pytest.mark.parametrize("address", INTERNAL)
def test_every_internal_address_class_is_not_public(address):
    assert not outbound.is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_global_unicast_addresses_are_public(address):
    assert outbound.is_public(ipaddress.ip_address(address))


@pytest.fixture
def no_allowed_hosts(settings):
    settings.SPECHUB_WEBHOOK_ALLOWED_HOSTS = frozenset()


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_the_api_refuses_an_internal_or_credentialed_webhook_url_with_a_reason_and_stores_nothing(
    db, client, django_user_model, no_allowed_hosts, url
):
    client.force_login(django_user_model.objects.create_user("author", password="pw"))
    refused = client.post("/api/v1/webhooks/", {"url": url}, content_type="application/json")
    assert refused.status_code == 400, refused.content
    message = refused.json()["error"]["message"]
    assert "refused" in message and ("public addresses" in message or "user:password" in message), message
    assert not WebhookEndpoint.objects.exists()


def test_a_name_that_does_not_resolve_yet_is_accepted_and_checked_again_when_sent(db, no_allowed_hosts):
    assert outbound.url_refusal("https://hooks.invalid/spechub", frozenset()) is None
    with pytest.raises(outbound.Unresolved):
        outbound.pinned_address("https://hooks.invalid/spechub", frozenset())


def _pending_delivery(owner, url):
    endpoint = WebhookEndpoint.objects.create(owner=owner, url=url, events=[], secret="s" * 64)
    return WebhookDelivery.objects.create(
        endpoint=endpoint, event=WebhookEvent.CERTIFIED, dedupe_key="x", body="{}", next_attempt_at="2000-01-01T00:00Z"
    )


def test_a_delivery_to_an_address_that_became_internal_is_refused_at_send_time(db, django_user_model, settings):
    owner = django_user_model.objects.create_user("author", password="pw")
    with webhook_receiver() as receiver:
        delivery = _pending_delivery(owner, receiver.url)  # registered while loopback was allowed
        settings.SPECHUB_WEBHOOK_ALLOWED_HOSTS = frozenset()
        webhook_deliver(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert receiver.received == []
    assert delivery.state == DeliveryState.PENDING and delivery.last_error.startswith("refused: 127.0.0.1 resolves to 127.0.0.1")


def test_userinfo_in_an_old_endpoint_url_is_never_sent_on(db, django_user_model):
    owner = django_user_model.objects.create_user("author", password="pw")
    with webhook_receiver() as receiver:
        url = receiver.url.replace("http://", "http://user:secret@")
        delivery = _pending_delivery(owner, url)
        assert webhook_deliver(delivery_id=delivery.pk) == DeliveryState.DELIVERED
    [received] = receiver.received
    assert "Authorization" not in received.headers and received.path == "/hooks/spechub"


def test_the_request_goes_to_the_checked_address_with_the_name_as_host_with_loopback_counted_public_test_double(
    db, django_user_model, monkeypatch, settings
):
    """A name is resolved once, checked, and connected to by that address: a second lookup cannot move it."""
    settings.SPECHUB_WEBHOOK_ALLOWED_HOSTS = frozenset()
    monkeypatch.setattr(outbound, "is_public", lambda address: address.is_loopback)
    lookups = []
    real = outbound.resolve

    def counted(host, port):
        lookups.append(host)
        return [address for address in real(host, port) if address.version == 4]  # the receiver listens on IPv4

    monkeypatch.setattr(outbound, "resolve", counted)
    with webhook_receiver() as receiver:
        url = receiver.url.replace("127.0.0.1", "localhost")
        status = outbound.post(url, content=b"{}", headers={}, timeout=5, allowed_hosts=frozenset())
    assert status == 200 and lookups == ["localhost"]
    [received] = receiver.received
    assert received.headers["Host"] == url.split("/")[2]


@contextmanager
def raw_receiver(answer) -> Iterator[str]:
    """A loopback server that reads a request and answers with `answer(connection)`, however slowly."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.recv(65536)
                with suppress(OSError):  # the client hung up, as it should
                    answer(connection, stop)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def drip(connection, stop) -> None:
    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
        if stop.wait(0.4):
            return
        connection.sendall(bytes([byte]))


def endless(connection, stop) -> None:
    connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
    while not stop.is_set():
        connection.sendall(chunk)


def test_a_receiver_that_drips_its_answer_is_cut_off_when_the_time_is_up():
    with raw_receiver(drip) as url:
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException, match="no complete answer within 1"):
            outbound.post(url, content=b"{}", headers={}, timeout=1, allowed_hosts={"127.0.0.1"})
        assert time.monotonic() - started < 3  # each byte came well within the per-read limit


def test_an_endless_answer_is_read_no_further_than_the_cap():
    with raw_receiver(endless) as url:
        started = time.monotonic()
        status = outbound.post(url, content=b"{}", headers={}, timeout=5, allowed_hosts={"127.0.0.1"})
    assert status == 200 and time.monotonic() - started < 3


def test_an_owner_may_register_only_so_many_endpoints(db, client, django_user_model, settings):
    settings.SPECHUB_WEBHOOKS_PER_USER = 2
    client.force_login(django_user_model.objects.create_user("author", password="pw"))
    codes = [
        client.post("/api/v1/webhooks/", {"url": f"https://hooks.invalid/{n}"}, content_type="application/json").status_code
        for n in range(3)
    ]
    assert codes == [201, 201, 400] and WebhookEndpoint.objects.count() == 2
