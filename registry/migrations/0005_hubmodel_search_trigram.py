"""Catalog indexes PostgreSQL can have and SQLite cannot (SQLite, the demo's database, scans instead).

- Trigram indexes for substring search: Django's icontains compiles to
  UPPER(col::text) LIKE UPPER(%s), so they are on that expression.
- The speedup and acceptance-length sorts, which put unmeasured pairs last.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

INDEXES = {
    "hubmodel_repo_id_trgm": "registry_hubmodel USING gin (UPPER(repo_id::text) gin_trgm_ops)",
    "hubmodel_family_trgm": "registry_hubmodel USING gin (UPPER(family::text) gin_trgm_ops)",
    "pair_fastest": "registry_pair (speedup DESC NULLS LAST, id DESC)",
    "pair_best_al": "registry_pair (mean_acceptance_length DESC NULLS LAST, id DESC)",
}


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, target in INDEXES.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("registry", "0004_pair_newest_index")]
    operations = [migrations.RunPython(create, drop)]
