"""The catalog's substring search reads one column of the pair through a trigram index.

Matching hub models first and then pairs by either foreign key (migration 0005's way) made
PostgreSQL scan every pair for the OR: 130 ms at 100,000 pairs. `search` holds both repo ids,
upper-cased, and a GIN trigram index answers `LIKE '%...%'` on it directly (under 1 ms there).
The (method, speedup) index serves the minimum-speedup filter with a method. PostgreSQL only, as
in 0005; SQLite scans.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

INDEXES = {
    "pair_search_trgm": "registry_pair USING gin (search gin_trgm_ops)",
    "pair_method_speedup": "registry_pair (method, speedup)",
}
FILL = """
UPDATE registry_pair AS p
SET search = UPPER(COALESCE(d.repo_id, '') || ' ' || v.repo_id)
FROM registry_hubmodel AS v, registry_pair AS q LEFT JOIN registry_hubmodel AS d ON d.id = q.draft_id
WHERE q.id = p.id AND v.id = p.verifier_id
"""


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FILL)
        schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        for name, target in INDEXES.items():
            schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")
        return
    pairs = apps.get_model("registry", "Pair").objects.select_related("draft", "verifier")
    for pair in pairs.iterator():
        pair.search = f"{pair.draft.repo_id if pair.draft_id else ''} {pair.verifier.repo_id}".upper()
        pair.save(update_fields=["search"])


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("registry", "0014_pair_options_lossless")]
    operations = [
        migrations.AddField(model_name="pair", name="search", field=models.TextField(blank=True, default="", editable=False)),
        migrations.RunPython(create, drop),
    ]
