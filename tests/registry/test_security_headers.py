"""Every response carries the Content-Security-Policy, DEBUG on or off, and no page needs what the policy blocks.

The walk reuses tests/registry/test_every_url_answers.py's routes and catalog: every page, API GET and admin page,
anonymous, signed in (the owner's workload and deployment pages) and as staff (the admin). The templates and every
page rendered are scanned for what `script-src 'self'; style-src 'self'` blocks: an inline script, a <style> block,
an on*= handler, a style= attribute, a javascript: URL.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.test import Client, RequestFactory
from django.urls import reverse
from rest_framework.renderers import BrowsableAPIRenderer

from registry.csp import HEADER, ContentSecurityPolicy
from tests.registry.test_every_url_answers import ROUTES, USERS, arguments, catalog, client_for  # noqa: F401 - the fixture
from tests.support.processes import ROOT

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
BLOCKED = re.compile(
    # A script with a body of its own; a JSON data block (json_script) is never run, so the policy lets it be.
    r"<script\b(?![^>]*\bsrc=)(?![^>]*\btype=\"application/json\")[^>]*>\s*[^<\s]"
    r"|<style\b"
    r"|<[a-z][^>]*\s(?:on[a-z]+|style)\s*="  # an event handler or a style attribute, on any element
    r"|=\s*[\"']?\s*javascript:",
    re.IGNORECASE,
)
# Answered by something other than a route: the docs' init script, a static file (WhiteNoise answers before the
# views), a page that does not exist.
OTHER_PATHS = ("/api/docs/?script=", "/static/registry/confirm.js", "/static/registry/site.css", "/no-such-page/")
# The pages a person reads, each of which must have been rendered and scanned by the walk.
PAGES = {
    "catalog", "pair", "run", "queue", "submit", "matrix", "engines", "imports", "workloads", "workload",
    "deployments", "deployment", "api-docs", "login", "admin:login", "admin:index",
}  # fmt: skip


def blocked(html: str) -> list[str]:
    """Return what the policy would block in a page or template, with a little context."""
    return [html[max(0, m.start() - 40) : m.end() + 40] for m in BLOCKED.finditer(html)]


def test_the_setting_is_the_policy_the_issue_asks_for() -> None:
    assert django_settings.SPECHUB_CONTENT_SECURITY_POLICY == POLICY
    assert "unsafe" not in POLICY


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_every_response_carries_the_policy_and_no_page_needs_inline_script_or_style(
    catalog,  # noqa: F811 - the imported fixture
    settings,
    debug,
):
    settings.DEBUG = debug
    missing, inline, scanned = [], [], set()
    for who in USERS:
        client = client_for(who)
        answers = [(name, client.get(reverse(name, kwargs=arguments(name, parameters)), HTTP_ACCEPT="text/html"))
                   for name, parameters in ROUTES]  # fmt: skip
        answers += [(path, client.get(path, HTTP_ACCEPT="text/html")) for path in OTHER_PATHS]
        for name, response in answers:
            if response.get(HEADER) != POLICY:
                missing.append((who, name, response.status_code, response.get(HEADER)))
            if _is_our_page(response):
                scanned.add(name)
                inline += [(who, name, found) for found in blocked(response.content.decode())]
    assert not missing, missing
    assert not inline, inline
    assert scanned >= PAGES, PAGES - scanned


def _is_our_page(response: HttpResponseBase) -> bool:
    """A page rendered from our templates or Django's admin: an HTML 200 that is not DRF's browsable API.

    The browsable API (DRF's own templates) keeps a few style= attributes: under the policy they are ignored, and its
    forms and scripts, all static files, still work. Django's DEBUG error pages carry inline CSS and are not ours either.
    """
    is_html = response.status_code == 200 and response.get("Content-Type", "").startswith("text/html")
    return is_html and not isinstance(getattr(response, "accepted_renderer", None), BrowsableAPIRenderer)


@pytest.mark.parametrize("template", sorted((ROOT / "templates").rglob("*.html")), ids=lambda p: p.name)
def test_no_template_holds_an_inline_script_style_handler_or_javascript_url(template: Path) -> None:
    assert not blocked(template.read_text()), blocked(template.read_text())


def test_the_charts_draw_with_classes_and_presentation_attributes_only() -> None:
    assert not blocked((ROOT / "registry" / "charts.py").read_text())


def test_the_api_docs_load_their_init_script_from_a_url_of_their_own(client: Client) -> None:
    page = client.get("/api/docs/").content.decode()
    assert '<script src="/api/docs/?script="></script>' in page and not blocked(page)
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle(" in script.content.decode()


def test_a_view_that_sets_its_own_policy_keeps_it() -> None:
    def view(request: HttpRequest) -> HttpResponse:
        response = HttpResponse()
        response[HEADER] = "default-src 'none'"
        return response

    response = ContentSecurityPolicy(view)(RequestFactory().get("/"))
    assert response[HEADER] == "default-src 'none'"
