"""Sign-in throttling: too many failed passwords lock an account for a while, from one address or from all.

Counts live in the shared cache (Redis in production), so every web process sees them. The
refusal says so and for how long, rather than pretending the password was wrong.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest


def _keys(request: HttpRequest | None, username: str) -> tuple[str, str]:
    account = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    address = request.META.get("REMOTE_ADDR", "") if request else ""
    return f"login-failures:{account}:{address}", f"login-failures:{account}"


def login_locked(request: HttpRequest | None, username: str) -> bool:
    """Return whether sign-ins for `username` (from this address, or from anywhere) are locked now."""
    here, anywhere = _keys(request, username)
    return bool(
        (cache.get(here) or 0) >= settings.SPECHUB_LOGIN_FAILURES_PER_ADDRESS
        or (cache.get(anywhere) or 0) >= settings.SPECHUB_LOGIN_FAILURES_PER_ACCOUNT
    )


def login_failed(request: HttpRequest | None, username: str) -> None:
    """Count one failed sign-in; the count lapses SPECHUB_LOGIN_LOCK_SECONDS after the first failure."""
    for key in _keys(request, username):
        if not cache.add(key, 1, settings.SPECHUB_LOGIN_LOCK_SECONDS):
            try:
                cache.incr(key)
            except ValueError:  # lapsed between add and incr
                cache.add(key, 1, settings.SPECHUB_LOGIN_LOCK_SECONDS)


class ThrottledSignIn:
    """Refuses a locked account before checking its password, and counts wrong passwords."""

    request: HttpRequest | None
    cleaned_data: dict[str, Any]

    def clean(self) -> dict[str, Any]:
        username = str(self.cleaned_data.get("username") or "")
        if username and login_locked(self.request, username):
            minutes = max(1, settings.SPECHUB_LOGIN_LOCK_SECONDS // 60)
            raise forms.ValidationError(
                f"Too many failed sign-ins for this account; try again in up to {minutes} minutes.", code="locked"
            )
        try:
            cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        except forms.ValidationError:
            if username:
                login_failed(self.request, username)
            raise
        return cleaned


class SignInForm(ThrottledSignIn, AuthenticationForm):
    pass


class AdminSignInForm(ThrottledSignIn, AdminAuthenticationForm):
    pass
