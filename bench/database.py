"""A PostgreSQL database of a benchmark's own, beside the one DATABASE_URL names, with Django set up on it."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit


def use_bench_database(name: str, *, fresh: bool) -> str:
    """Point Django at database `name` on DATABASE_URL's server (made if missing; dropped and made again when
    `fresh`), set Django up, and return its URL."""
    import psycopg

    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/spechub")
    parts = urlsplit(base)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as admin:
        if fresh:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if fresh or not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            admin.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(parts._replace(path=f"/{name}"))
    os.environ.update(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="registry.settings")
    import django

    django.setup()
    return url
