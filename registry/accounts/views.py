"""The accounts' pages: Django's own sign-in and password views, with the throttled, known-device forms of
registry/accounts/logins.py; the rest of the account pages are django.contrib.auth's."""

from __future__ import annotations

from django.contrib.auth.views import LoginView, PasswordChangeView, PasswordResetView

from registry.accounts.logins import SignInForm, ThrottledPasswordChange, ThrottledPasswordReset

sign_in = LoginView.as_view(authentication_form=SignInForm)
password_reset = PasswordResetView.as_view(form_class=ThrottledPasswordReset)
password_change = PasswordChangeView.as_view(form_class=ThrottledPasswordChange)
