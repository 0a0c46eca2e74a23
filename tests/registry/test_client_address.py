"""The client's address: the peer's, or, behind the proxies we run, the one the nearest of them recorded."""

from __future__ import annotations

from django.test import RequestFactory

from registry.clients import client_address


def test_with_no_proxy_trusted_a_forwarded_header_is_ignored(settings):
    settings.SPECHUB_TRUSTED_PROXIES = 0
    request = RequestFactory().get("/", REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR="1.2.3.4")
    assert client_address(request) == "198.51.100.7"


def test_behind_one_proxy_the_client_is_the_last_hop_it_appended_not_what_the_client_wrote(settings):
    settings.SPECHUB_TRUSTED_PROXIES = 1
    # The client wrote "1.2.3.4"; our proxy appended the address it saw, 198.51.100.7.
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.7")
    assert client_address(request) == "198.51.100.7"
    assert client_address(RequestFactory().get("/", REMOTE_ADDR="10.0.0.2")) == "10.0.0.2"  # no header: the peer
