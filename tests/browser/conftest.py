from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; Django's ORM calls in the
    # test body are still synchronous, so allow them.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def csp_errors() -> list[str]:
    """The Content-Security-Policy violations chromium reported in the test's pages (see `watch_csp`)."""
    return []


def watch_csp(context: Any, errors: list[str]) -> None:
    """Record in `errors` each console error in which chromium reports something the policy blocked."""

    def record(message: Any) -> None:
        if message.type == "error" and "Content Security Policy" in message.text:
            errors.append(f"{message.location.get('url')}: {message.text}")

    context.on("console", record)


@pytest.fixture
def page(browser: Any, csp_errors: list[str]) -> Iterator[Any]:
    context = browser.new_context()
    watch_csp(context, csp_errors)
    page = context.new_page()
    yield page
    context.close()
    # Every browser test: no page may need an inline script, style or handler (registry/csp.py).
    assert not csp_errors, csp_errors
