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


WRONG = "Please enter a correct username and password"


@pytest.mark.django_db(transaction=True)
def test_guesses_sent_at_once_get_no_more_password_checks_than_the_limit():
    """15 wrong passwords at once, twice: each attempt is counted before its check, so at most 3 are checked."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connection

    User.objects.create_user("alice", password="right horse")
    start = Barrier(15)

    def guess(_: int) -> str:
        start.wait()
        try:
            return sign_in(Client(), "/accounts/login/", "alice", "wrong")
        finally:
            connection.close()

    with ThreadPoolExecutor(15) as pool:
        pages = [page for _ in range(2) for page in pool.map(guess, range(15))]
    checked = sum(WRONG in page for page in pages)
    assert checked <= 3 and sum("Too many failed sign-ins" in page for page in pages) == 30 - checked, checked


def test_with_the_cache_down_right_and_wrong_passwords_get_the_same_refusal(settings):
    settings.CACHES = {"default": {"BACKEND": "registry.cache.FailOpenRedisCache", "LOCATION": "redis://127.0.0.1:1/0",
                                   "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2}}}  # fmt: skip
    User.objects.create_user("alice", password="right horse")
    answers = [Client().post("/accounts/login/", {"username": "alice", "password": p}) for p in ("wrong", "right horse")]
    assert [a.status_code for a in answers] == [200, 200]  # fail closed: no 500, no 302
    pages = [a.content.decode() for a in answers]
    assert all("Sign-in is unavailable for a moment" in page and WRONG not in page for page in pages)


def test_a_non_staff_users_right_password_at_the_admin_is_not_a_failure():
    User.objects.create_user("alice", password="right horse")  # not staff: the admin refuses her, rightly
    client = Client()
    for _ in range(4):
        assert "Too many failed sign-ins" not in sign_in(client, "/admin/login/", "alice", "right horse")
    assert client.post("/accounts/login/", {"username": "alice", "password": "right horse"}).status_code == 302


def test_a_stranger_locking_the_account_everywhere_does_not_lock_out_the_owners_known_browser(settings):
    settings.SPECHUB_LOGIN_FAILURES_PER_ACCOUNT = 4
    User.objects.create_user("alice", password="right horse")
    owner = Client(REMOTE_ADDR="198.51.100.7")
    assert owner.post("/accounts/login/", {"username": "alice", "password": "right horse"}).status_code == 302
    owner.post("/accounts/logout/")  # signed out; the browser keeps its known-device cookie
    for attempt in range(6):  # from six addresses: past the account-wide limit, never past one address's
        sign_in(Client(REMOTE_ADDR=f"203.0.113.{attempt}"), "/accounts/login/", "alice", "wrong")
    new_browser = Client(REMOTE_ADDR="198.51.100.8")
    assert "Too many failed sign-ins" in sign_in(new_browser, "/accounts/login/", "alice", "right horse")
    assert owner.post("/accounts/login/", {"username": "alice", "password": "right horse"}).status_code == 302


def test_password_resets_past_the_hourly_limit_answer_the_same_and_send_nothing(settings):
    from django.core import mail

    settings.SPECHUB_PASSWORD_RESETS = 3
    User.objects.create_user("alice", email="alice@example.org", password="right horse")
    answers = [Client().post("/accounts/password_reset/", {"email": "alice@example.org"}) for _ in range(8)]
    assert {(a.status_code, a["Location"]) for a in answers} == {(302, "/accounts/password_reset/done/")}
    assert len(mail.outbox) == 3


def test_wrong_current_passwords_at_a_password_change_lock_like_sign_ins():
    alice = User.objects.create_user("alice", password="right horse")
    client = Client()
    client.force_login(alice)

    def change(old: str) -> str:
        body = {"old_password": old, "new_password1": "a new long passphrase", "new_password2": "a new long passphrase"}
        return client.post("/accounts/password_change/", body).content.decode()

    pages = [change("wrong") for _ in range(3)]
    assert all("Too many wrong passwords" not in page for page in pages)
    assert "Too many wrong passwords" in change("right horse")
    alice.refresh_from_db()
    assert alice.check_password("right horse")
