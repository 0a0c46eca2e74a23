"""Sign-in throttling: too many failed passwords lock an account for a while, from one address or from all.

Counts live in the shared cache (Redis in production), so every web process sees them. The
refusal says so and for how long, rather than pretending the password was wrong.

Each attempt is counted before its password is checked, by one atomic increment, and uncounted
when the password was right: counting only after a failure let 15 guesses sent at once all be
checked against a limit of 5. When the cache cannot count, sign-in fails closed, with the same
answer for a right and a wrong password, so a cache outage is neither a way past the lock nor
an oracle.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest

from registry.cache import UNREACHABLE
from registry.clients import client_address

logger = logging.getLogger(__name__)


class CountingUnavailable(Exception):
    """The shared cache did not count the attempt."""


def _keys(request: HttpRequest | None, username: str) -> tuple[str, str]:
    account = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    address = client_address(request) if request else ""
    return f"login-failures:{account}:{address}", f"login-failures:{account}"


def _counted(key: str, step: int) -> int:
    """Add `step` to the count at `key` atomically and return it; a new count lapses SPECHUB_LOGIN_LOCK_SECONDS on.

    Redis keeps a key's expiry through INCR, so further attempts never renew the lock.
    """
    for _ in range(2):  # a count that lapses between add and incr is started again once
        cache.add(key, 0, settings.SPECHUB_LOGIN_LOCK_SECONDS)
        try:
            return int(cache.incr(key, step))
        except ValueError:
            continue
        except UNREACHABLE as exc:
            raise CountingUnavailable from exc
    raise CountingUnavailable(f"the cache keeps no count at {key}")


def attempt_begin(request: HttpRequest | None, username: str) -> bool:
    """Count one attempt for `username` here and everywhere; return whether it may be checked (not locked)."""
    here, anywhere = _keys(request, username)
    from_here, from_anywhere = _counted(here, 1), _counted(anywhere, 1)  # both, so attempt_right can uncount both
    return (
        from_here <= settings.SPECHUB_LOGIN_FAILURES_PER_ADDRESS and from_anywhere <= settings.SPECHUB_LOGIN_FAILURES_PER_ACCOUNT
    )


def attempt_right(request: HttpRequest | None, username: str) -> None:
    """Uncount an attempt whose password was right: only failures lock."""
    for key in _keys(request, username):
        try:
            _counted(key, -1)
        except CountingUnavailable:
            logger.warning("a right password's attempt stays counted: the cache did not answer")


class ThrottledSignIn:
    """Refuses a locked account before checking its password, and counts wrong passwords."""

    request: HttpRequest | None
    cleaned_data: dict[str, Any]
    user_cache: Any

    def clean(self) -> dict[str, Any]:
        username = str(self.cleaned_data.get("username") or "")
        if not username:
            return super().clean()  # type: ignore[misc,no-any-return]
        try:
            allowed = attempt_begin(self.request, username)
        except CountingUnavailable:
            raise forms.ValidationError(
                "Sign-in is unavailable for a moment: failed attempts cannot be counted right now. Try again in a minute.",
                code="unavailable",
            ) from None
        if not allowed:
            minutes = max(1, settings.SPECHUB_LOGIN_LOCK_SECONDS // 60)
            raise forms.ValidationError(
                f"Too many failed sign-ins for this account; try again in up to {minutes} minutes.", code="locked"
            )
        try:
            cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        finally:
            if self.user_cache is not None:  # the password was right (the admin may still refuse a non-staff user)
                attempt_right(self.request, username)
        return cleaned


class SignInForm(ThrottledSignIn, AuthenticationForm):
    pass


class AdminSignInForm(ThrottledSignIn, AdminAuthenticationForm):
    pass
