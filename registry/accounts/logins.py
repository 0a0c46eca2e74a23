"""Sign-in throttling: too many failed passwords lock an account for a while, from one address or from all.

Counts live in the shared cache (Redis in production), so every web process sees them. The
refusal says so and for how long, rather than pretending the password was wrong.

Each attempt is counted before its password is checked, by one atomic increment, and uncounted
when the password was right: counting only after a failure let 15 guesses sent at once all be
checked against a limit of 5. When the cache cannot count, sign-in fails closed, with the same
answer for a right and a wrong password, so a cache outage is neither a way past the lock nor
an oracle.

A stranger who fails 20 times from anywhere locks the account everywhere, but not on the owner's own
known devices: a browser that signed in to the account before carries a signed cookie naming it,
and the account-wide count does not bind there (the per-address count still does). Password
resets are counted per address and per email, and past the limit the page answers as always but
sends nothing; a signed-in user's wrong current passwords at a password change lock like sign-ins.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm, PasswordResetForm
from django.contrib.auth.signals import user_logged_in
from django.core.cache import cache
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

from registry.cache import UNREACHABLE
from registry.clients import client_address

logger = logging.getLogger(__name__)


class CountingUnavailable(Exception):
    """The shared cache did not count the attempt."""


DEVICE_COOKIE, DEVICE_SALT, DEVICE_DAYS = "spechub_device", "spechub.known-device", 180


def account_of(username: str) -> str:
    return hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]


def _keys(request: HttpRequest | None, username: str) -> tuple[str, str]:
    account = account_of(username)
    address = client_address(request) if request else ""
    return f"login-failures:{account}:{address}", f"login-failures:{account}"


def known_device(request: HttpRequest | None, username: str) -> bool:
    """Whether this browser signed in to `username`'s account before (its signed cookie names the account)."""
    if request is None:
        return False
    found = request.get_signed_cookie(DEVICE_COOKIE, default=None, salt=DEVICE_SALT, max_age=DEVICE_DAYS * 86400)
    return found == account_of(username)


def _counted(key: str, step: int, *, lapse: int | None = None) -> int:
    """Add `step` to the count at `key` atomically and return it; a new count lapses `lapse` seconds on
    (SPECHUB_LOGIN_LOCK_SECONDS by default).

    Redis keeps a key's expiry through INCR, so further attempts never renew the lock.
    """
    for _ in range(2):  # a count that lapses between add and incr is started again once
        cache.add(key, 0, lapse or settings.SPECHUB_LOGIN_LOCK_SECONDS)
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
    everywhere_ok = from_anywhere <= settings.SPECHUB_LOGIN_FAILURES_PER_ACCOUNT or known_device(request, username)
    return from_here <= settings.SPECHUB_LOGIN_FAILURES_PER_ADDRESS and everywhere_ok


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


@receiver(user_logged_in)
def device_remember(sender: Any, request: HttpRequest | None, user: Any, **_: Any) -> None:
    """Mark the browser that signed in as a known device of the account (KnownDevice sets the cookie)."""
    if request is not None:
        request.spechub_device = account_of(user.get_username())  # type: ignore[attr-defined]


class KnownDevice:
    """Middleware: after a sign-in, give the browser the signed cookie that makes it a known device."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        account = getattr(request, "spechub_device", None)
        if account:
            response.set_signed_cookie(DEVICE_COOKIE, account, salt=DEVICE_SALT, max_age=DEVICE_DAYS * 86400,
                                       httponly=True, secure=settings.SESSION_COOKIE_SECURE, samesite="Lax")  # fmt: skip
        return response


class ThrottledPasswordReset(PasswordResetForm):
    """Sends at most SPECHUB_PASSWORD_RESETS emails an hour per address and per email; past that the page answers
    the same and sends nothing, so the limit tells nobody whether an account exists."""

    def save(self, *args: Any, **kwargs: Any) -> None:
        request: HttpRequest | None = kwargs.get("request")
        email = str(self.cleaned_data.get("email", "")).strip().lower()
        keys = (f"password-resets:{account_of(email)}", f"password-resets:{client_address(request) if request else ''}")
        try:
            counts = [_counted(key, 1, lapse=3600) for key in keys]
        except CountingUnavailable:
            logger.warning("password reset not sent: the cache cannot count resets")
            return
        if max(counts) > settings.SPECHUB_PASSWORD_RESETS:
            logger.warning("password reset not sent: over %d an hour", settings.SPECHUB_PASSWORD_RESETS)
            return
        super().save(*args, **kwargs)


class ThrottledPasswordChange(PasswordChangeForm):
    """A wrong current password counts like a failed sign-in, so a borrowed session cannot guess it."""

    def clean_old_password(self) -> str:
        username = self.user.get_username()
        try:
            allowed = attempt_begin(None, f"change:{username}")
        except CountingUnavailable:
            raise forms.ValidationError("Password change is unavailable for a moment; try again in a minute.") from None
        if not allowed:
            minutes = max(1, settings.SPECHUB_LOGIN_LOCK_SECONDS // 60)
            raise forms.ValidationError(f"Too many wrong passwords; try again in up to {minutes} minutes.", code="locked")
        old: str = super().clean_old_password()
        attempt_right(None, f"change:{username}")
        return old
