"""Every response carries the Content-Security-Policy in SPECHUB_CONTENT_SECURITY_POLICY.

A small middleware rather than django-csp: the policy is one fixed header, and nothing on the site needs
a nonce or a per-view exception (the pages load every script and style from static files, and the API
docs load their init script from a URL of their own, registry/urls.py). Django 6.0 brings its own
(`django.middleware.csp.ContentSecurityPolicyMiddleware` with `SECURE_CSP`), which replaces this on upgrade
without a dependency to drop.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"


class ContentSecurityPolicy:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # A view that sets its own policy keeps it: that is a deliberate, reviewed exception, not one to overwrite.
        response.headers.setdefault(HEADER, settings.SPECHUB_CONTENT_SECURITY_POLICY)
        return response
