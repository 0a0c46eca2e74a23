"""Writes to the transparency log: append an entry and sign the new checkpoint, in the caller's transaction.

Appending happens where the signing key is, in the transaction that stores what is logged: a certificate is
never stored without its entry, nor an entry without its certificate. The head row is locked first, so entries
get gapless indexes in the order they commit, on PostgreSQL and on SQLite (which locks the whole file to write).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from kernel.transparency import checkpoint, entries
from registry.models import Certificate, EntryKind, LogEntry, LogHead
from registry.transparency.selectors import log_tree


def log_origin() -> str:
    """Return the log's origin, the name its checkpoints carry and are signed under."""
    return checkpoint.origin_of(settings.SPECHUB_PUBLIC_URL)


def log_append(*, kind: EntryKind, certificate: Certificate, entry: bytes, key: Ed25519PrivateKey) -> LogEntry:
    """Append `entry` to the log and sign, with the registry's `key`, the checkpoint that includes it; return the entry."""
    with transaction.atomic():
        LogHead.objects.bulk_create([LogHead(pk=1)], ignore_conflicts=True)
        head = LogHead.objects.select_for_update().get(pk=1)
        tree = log_tree()
        leaf = entries.entry_leaf(entry)
        root = tree.tree.root_with(leaf)
        logged = LogEntry.objects.create(
            index=max(head.size, tree.top + 1),
            kind=kind,
            certificate=certificate,
            entry=entry,
            entry_sha256=entries.entry_sha256(entry),
            leaf_hash=leaf,
            root_hash=root,
            logged_at=timezone.now(),
        )
        head.size = logged.index + 1
        head.checkpoint = checkpoint.sign(checkpoint.Checkpoint(log_origin(), tree.tree.size + 1, root), key)
        head.save(update_fields=["size", "checkpoint"])
    return logged
