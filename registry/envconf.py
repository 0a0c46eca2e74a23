"""Typed readers for settings taken from the environment.

Each helper returns a working local default when the variable is unset and
raises ImproperlyConfigured, naming the variable, when the value is malformed.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_DATABASE_SCHEMES = {"sqlite", "postgres", "postgresql", "pgsql"}
_BROKER_SCHEMES = {"redis", "rediss", "redis+socket"}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def env_str(name: str, default: str) -> str:
    """Return the variable, or the default when it is unset or empty."""
    return _raw(name) or default


def env_bool(name: str, default: bool) -> bool:
    """Return the variable read as a boolean (1/0, true/false, yes/no, on/off)."""
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use 1/0, true/false, yes/no or on/off.")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Return the variable read as an integer, at least `minimum` when given."""
    value = _raw(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum of {minimum}.")
    return number


def env_int_list(name: str, default: list[int]) -> list[int]:
    """Return comma-separated positive integers, e.g. concurrency levels."""
    value = _raw(name)
    if not value:
        return list(default)
    try:
        numbers = [int(item) for item in value.split(",") if item.strip()]
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} must be comma-separated integers, e.g. 1,2,4.") from None
    if not numbers or min(numbers) < 1:
        raise ImproperlyConfigured(f"{name}={value!r} must list integers of at least 1.")
    return numbers


def env_str_list(name: str) -> list[str]:
    """Return comma-separated names (spaces kept inside a name), or an empty list when unset."""
    return [item.strip() for item in (_raw(name) or "").split(",") if item.strip()]


def env_float(name: str, default: float) -> float:
    """Return the variable as a float, the default when unset."""
    value = _raw(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}.") from None


def env_list(name: str, default: list[str]) -> list[str]:
    """Return a comma-separated list of lowercase names (letters, digits, '.', '_', '-')."""
    value = _raw(name)
    if value is None:
        return list(default)
    items = [item.strip().lower() for item in value.split(",") if item.strip()]
    bad = [item for item in items if not _NAME.fullmatch(item)]
    if bad:
        raise ImproperlyConfigured(f"{name} holds invalid names {bad}; use letters, digits, '.', '_' or '-'.")
    return items


def env_url(name: str, *, schemes: set[str]) -> str | None:
    """Return the variable when it is a URL with one of `schemes`, None when unset."""
    value = _raw(name)
    if not value:
        return None
    parts = urlsplit(value)
    if parts.scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name} has scheme {parts.scheme or '(none)'!r}; expected one of {sorted(schemes)}, e.g. {sorted(schemes)[0]}://..."
        )
    try:
        parts.port  # noqa: B018 - urlsplit validates the port lazily
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} has an invalid port: {exc}.") from None
    return value


def env_database(name: str, *, default_sqlite_path: str) -> dict[str, Any]:
    """Return a Django DATABASES entry from a database URL, SQLite at the path when unset."""
    url = env_url(name, schemes=_DATABASE_SCHEMES)
    if url is None:
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": default_sqlite_path, "OPTIONS": dict(_SQLITE_OPTIONS)}
    if not url.startswith("sqlite") and not urlsplit(url).path.strip("/"):
        raise ImproperlyConfigured(f"{name} names no database; add one after the host, e.g. postgres://host:5432/spechub.")
    try:
        config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} could not be parsed: {exc}.") from None
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = {**_SQLITE_OPTIONS, **config.get("OPTIONS", {})}
    return config


# SQLite, however it is named: a burst of writes waits for its lock (up to 20 s) instead of failing "database is
# locked". Transactions take the write lock when they begin, so they run one at a time: that is what stands in for
# select_for_update (a no-op on SQLite) under the quota and rate-limit checks. A deferred one that reads first would
# fail at once when it tries to write. WAL lets readers go on meanwhile.
_SQLITE_OPTIONS = {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}


def env_broker(name: str) -> str | None:
    """Return the Celery broker URL, or None to run tasks in-process."""
    return env_url(name, schemes=_BROKER_SCHEMES)
