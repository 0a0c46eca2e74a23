"""Guessing passwords: a few wrong ones lock the account for a while, on the site and in the admin, and say so."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_counts(settings):
    cache.clear()
    settings.SPECHUB_LOGIN_FAILURES_PER_ADDRESS = 3


def sign_in(client: Client, path: str, username: str, password: str) -> str:
    return client.post(path, {"username": username, "password": password}).content.decode()


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_after_three_wrong_passwords_even_the_right_one_is_refused_with_the_reason(path):
    User.objects.create_user("alice", password="right horse", is_staff=True)
    client = Client()
    for _ in range(3):
        assert "Too many failed sign-ins" not in sign_in(client, path, "alice", "wrong")
    page = sign_in(client, path, "alice", "right horse")
    assert "Too many failed sign-ins" in page and "_auth_user_id" not in client.session


def test_a_lock_on_one_account_leaves_others_alone():
    User.objects.create_user("alice", password="a-password")
    User.objects.create_user("bob", password="b-password")
    client = Client()
    for _ in range(3):
        sign_in(client, "/accounts/login/", "alice", "wrong")
    response = client.post("/accounts/login/", {"username": "bob", "password": "b-password"})
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(User.objects.get(username="bob").pk)


def test_a_correct_password_before_the_limit_signs_in():
    User.objects.create_user("alice", password="a-password")
    client = Client()
    sign_in(client, "/accounts/login/", "alice", "wrong")
    assert client.post("/accounts/login/", {"username": "alice", "password": "a-password"}).status_code == 302
