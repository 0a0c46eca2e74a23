"""Settings read from the environment: working defaults, loud failures naming the variable."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from kernel import certificates
from registry import envconf
from tests.support.processes import ROOT

pytestmark = pytest.mark.process

LOAD_SETTINGS = (
    "import django; django.setup(); from django.conf import settings; "
    "print(settings.DATABASES['default']['ENGINE'], settings.CELERY_TASK_ALWAYS_EAGER)"
)
SERVICE_VARS = ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "DEBUG")


def load_settings(tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    base.update(DJANGO_SETTINGS_MODULE="registry.settings", SPECHUB_VAR_DIR=str(tmp_path), **env)
    return subprocess.run([sys.executable, "-c", LOAD_SETTINGS], cwd=ROOT, env=base, capture_output=True, text=True)


def test_with_nothing_set_it_uses_sqlite_and_queues_tasks_on_files_for_a_worker(tmp_path):
    result = load_settings(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.sqlite3", "False"]
    probe = "import django; django.setup(); from registry.celery import app; print(app.connection_for_write().transport_cls)"
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    env.update(DJANGO_SETTINGS_MODULE="registry.settings", SPECHUB_VAR_DIR=str(tmp_path))
    broker = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert broker.stdout.strip() == "filesystem", broker.stderr[-2000:]
    assert (tmp_path / "queue" / "messages").is_dir()  # kombu's filesystem transport, its folders made on first use
    eager = load_settings(tmp_path, SPECHUB_TASKS_IN_PROCESS="1")
    assert eager.stdout.split() == ["django.db.backends.sqlite3", "True"]  # in-process only when asked


def test_with_a_broker_set_tasks_go_through_it(tmp_path):
    result = load_settings(tmp_path, CELERY_BROKER_URL="redis://127.0.0.1:6379/0", DATABASE_URL="postgres://u@h:5432/db")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.postgresql", "False"]


@pytest.mark.parametrize("url", ["mysql://u@h/db", "not a url", "postgres://u@h:notaport/db", "postgres://u@h:5432/", "://"])
def test_a_malformed_database_url_is_refused_naming_the_variable(tmp_path, url):
    result = load_settings(tmp_path, DATABASE_URL=url)
    assert result.returncode != 0
    assert "ImproperlyConfigured: DATABASE_URL" in result.stderr


def test_a_missing_secret_key_in_production_mode_is_refused(tmp_path):
    result = load_settings(tmp_path, DEBUG="0")
    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_production_mode_without_a_signing_key_is_refused(tmp_path):
    result = load_settings(tmp_path, DEBUG="0", SECRET_KEY="x" * 50, SPECHUB_SIGNING_KEY="")
    assert result.returncode != 0
    assert "ImproperlyConfigured: SPECHUB_SIGNING_KEY must be set when DEBUG is off" in result.stderr


def test_the_web_tier_in_production_mode_loads_with_the_public_key_alone(tmp_path):
    public = certificates.public_key_text(certificates.private_key_from_seed(certificates.new_seed()).public_key())
    result = load_settings(tmp_path, DEBUG="0", SECRET_KEY="x" * 50, SPECHUB_SIGNING_KEY="", SPECHUB_SIGNING_PUBLIC_KEY=public)
    assert result.returncode == 0, result.stderr


def test_a_public_key_that_is_not_the_signing_keys_half_is_refused(tmp_path):
    other = certificates.public_key_text(certificates.private_key_from_seed(certificates.new_seed()).public_key())
    result = load_settings(tmp_path, SPECHUB_SIGNING_KEY=certificates.new_seed(), SPECHUB_SIGNING_PUBLIC_KEY=other)
    assert result.returncode != 0 and "is not the public half of SPECHUB_SIGNING_KEY" in result.stderr


def test_production_mode_passes_djangos_deployment_checks(tmp_path):
    import os

    # The browser tests' conftest allows async-unsafe ORM calls in this session; no deployment does.
    harness = (*SERVICE_VARS, "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in harness}
    env.update(
        DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="spechub.example.org", SPECHUB_VAR_DIR=str(tmp_path)
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT, env=env,
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


SHARED_CACHE = (
    "import django; django.setup(); from django.core.cache import cache; "
    "cache.set('probe', 1); print(type(cache._connections['default'] if hasattr(cache, '_connections') else cache).__name__,"
    " cache.get('probe', 'miss'))"
)


def test_with_a_redis_broker_the_cache_is_shared_redis_and_an_unreachable_one_reads_as_a_miss(tmp_path):
    import os

    from tests.services import free_port

    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    env.update(DJANGO_SETTINGS_MODULE="registry.settings", SPECHUB_VAR_DIR=str(tmp_path))

    def probe(broker: str) -> list[str]:
        run = subprocess.run(
            [sys.executable, "-c", SHARED_CACHE], cwd=ROOT, env={**env, "CELERY_BROKER_URL": broker},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        return run.stdout.split()

    assert probe(os.environ["CELERY_BROKER_URL"]) == ["FailOpenRedisCache", "1"]
    assert probe(f"redis://127.0.0.1:{free_port()}/0") == ["FailOpenRedisCache", "miss"]


def test_production_mode_with_a_secret_key_loads(tmp_path):
    result = load_settings(tmp_path, DEBUG="0", SECRET_KEY="x" * 50)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DEBUG", "maybe", "DEBUG='maybe' is not a boolean"),
        ("SPECHUB_RUN_MAX_ATTEMPTS", "three", "SPECHUB_RUN_MAX_ATTEMPTS='three' is not an integer"),
        ("SPECHUB_RUN_MAX_ATTEMPTS", "0", "SPECHUB_RUN_MAX_ATTEMPTS=0 is below the minimum of 1"),
        ("CELERY_BROKER_URL", "amqp://guest@localhost//", "CELERY_BROKER_URL has scheme 'amqp'"),
        ("SPECHUB_GPU_CLASSES", "h100,../x", "SPECHUB_GPU_CLASSES holds invalid names"),
        ("SPECHUB_RUN_HARD_TIME_LIMIT", "10", "SPECHUB_RUN_HARD_TIME_LIMIT must exceed"),
        ("SPECHUB_SIGNING_KEY", "c2hvcnQ=", "SPECHUB_SIGNING_KEY decodes to 5 bytes; an Ed25519 seed is 32"),
        ("SPECHUB_SIGNING_KEY", "not base64!", "SPECHUB_SIGNING_KEY is not base64"),
        ("SPECHUB_HUB_PUBLISH", "1", "SPECHUB_HUB_PUBLISH is on but SPECHUB_HUB_TOKEN is unset"),
        ("SPECHUB_REGRESSION_RTOL", "five", "SPECHUB_REGRESSION_RTOL"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(tmp_path, name, value, message):
    result = load_settings(tmp_path, **{name: value})
    assert result.returncode != 0
    assert message in result.stderr


def test_env_helpers_read_good_values(monkeypatch):
    monkeypatch.setenv("X_BOOL", "yes")
    monkeypatch.setenv("X_INT", "42")
    monkeypatch.setenv("X_LIST", "H100, a100")
    assert envconf.env_bool("X_BOOL", False) is True
    assert envconf.env_int("X_INT", 1, minimum=1) == 42
    assert envconf.env_list("X_LIST", []) == ["h100", "a100"]
    assert envconf.env_int("X_UNSET", 7) == 7


def test_a_socket_path_database_url_is_understood(monkeypatch):
    monkeypatch.setenv("X_DB", "postgres://postgres@%2Ftmp%2Fpg/spechub")
    config = envconf.env_database("X_DB", default_sqlite_path="unused")
    assert (config["HOST"], config["NAME"]) == ("/tmp/pg", "spechub")


def test_any_sqlite_database_url_takes_the_write_lock_when_a_transaction_begins(monkeypatch, tmp_path):
    """select_for_update is a no-op on SQLite: IMMEDIATE transactions are what holds the quota and rate checks."""
    monkeypatch.setenv("X_DB", f"sqlite:///{tmp_path}/named.sqlite3")
    named = envconf.env_database("X_DB", default_sqlite_path="unused")
    monkeypatch.delenv("X_DB")
    default = envconf.env_database("X_DB", default_sqlite_path=str(tmp_path / "default.sqlite3"))
    for config in (named, default):
        assert config["OPTIONS"]["transaction_mode"] == "IMMEDIATE" and config["OPTIONS"]["timeout"] == 20


def test_env_url_refuses_a_missing_scheme(monkeypatch):
    monkeypatch.setenv("X_URL", "localhost:6379")
    with pytest.raises(ImproperlyConfigured, match="X_URL has scheme"):
        envconf.env_url("X_URL", schemes={"redis"})


SQLITE_BURST = """
import threading, time, django
django.setup()
from django.core.management import call_command
from django.db import connection, transaction
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User

errors = []

def hold_the_lock():
    with transaction.atomic():
        User.objects.create(username="holder")
        time.sleep(1.5)
    connection.close()

def write_meanwhile():
    time.sleep(0.3)
    try:
        with transaction.atomic():  # reads, then writes: the case SQLite refuses at once by default
            User.objects.filter(username="waiter").exists()
            User.objects.create(username="waiter")
    except Exception as exc:
        errors.append(repr(exc))
    connection.close()

threads = [threading.Thread(target=hold_the_lock), threading.Thread(target=write_meanwhile)]
[t.start() for t in threads]
[t.join() for t in threads]
print(errors, User.objects.count())
"""


def test_on_the_sqlite_default_a_write_waits_for_the_lock_instead_of_failing(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    env.update(DJANGO_SETTINGS_MODULE="registry.settings", SPECHUB_VAR_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", SQLITE_BURST], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["[]", "2"], result.stdout
