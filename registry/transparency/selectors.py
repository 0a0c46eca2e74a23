"""Reads of the transparency log: the tree as the database holds it, proofs from it, and the latest checkpoint.

Each process keeps the leaves it has read in a Merkle tree (kernel.transparency.merkle), so a proof reads O(log n)
hashes from memory. Before each use the tree is held to the database: the number of entries, the newest index and
the root that entry stored must match, or the new entries are read, or, when anything else changed (an entry
gone, a transaction rolled back), the whole log is read again. The tree is therefore always the log the database
holds, and a row removed behind the registry's back changes the next checkpoint, which clients then refuse.
"""

from __future__ import annotations

import base64
import contextlib
import threading
from dataclasses import dataclass, field
from typing import Literal

from django.db import connection

from kernel.transparency import checkpoint, entries, merkle, note
from registry.models import Certificate, LogEntry, LogHead


@dataclass
class _Cached:
    tree: merkle.Tree = field(default_factory=merkle.Tree)
    top: int = -1  # the newest entry's index the tree holds
    positions: dict[int, int] | None = None  # index -> place in the tree, only when the indexes have a gap


_lock = threading.Lock()
_cached = _Cached()


@dataclass(frozen=True)
class LogTree:
    tree: merkle.Tree
    top: int
    positions: dict[int, int] | None
    checkpoint: str  # the latest signed checkpoint, read with the tree ("" before the first entry)


@dataclass(frozen=True)
class _State:
    count: int
    top: int
    root: bytes | None  # what the newest entry stored as the log's root
    checkpoint: str


def log_tree() -> LogTree:
    """Return the log's tree as the database holds it now, and the latest checkpoint."""
    global _cached
    state = _state()
    with _lock:
        if not _matches(_cached, state):
            _cached = _extended(_cached, state) or _read_all()
        return LogTree(_cached.tree, _cached.top, _cached.positions, state.checkpoint)


def _state() -> _State:
    """Read, in one query, what the cached tree is held to: the entries' count, the newest, its root, the head."""
    quote = connection.ops.quote_name
    entries_table, head_table, index = quote(LogEntry._meta.db_table), quote(LogHead._meta.db_table), quote("index")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT COUNT(*) FROM {entries_table}), (SELECT MAX({index}) FROM {entries_table}), "  # noqa: S608 - names
            f"(SELECT root_hash FROM {entries_table} ORDER BY {index} DESC LIMIT 1), "
            f"(SELECT checkpoint FROM {head_table} WHERE id = 1)"
        )
        count, top, root, checkpoint = cursor.fetchone()
    return _State(count, -1 if top is None else top, None if root is None else bytes(root), checkpoint or "")


def _matches(cached: _Cached, state: _State) -> bool:
    if cached.tree.size != state.count or cached.top != state.top:
        return False
    return state.count == 0 or state.root == cached.tree.root()


def _stored_root(index: int) -> bytes | None:
    found = LogEntry.objects.filter(index=index).values_list("root_hash", flat=True).first()
    return None if found is None else bytes(found)


def _extended(cached: _Cached, state: _State) -> _Cached | None:
    """Return the cached tree with the entries after it read, when nothing before them changed; None otherwise."""
    count, top = state.count, state.top
    if cached.positions is not None or count <= cached.tree.size or top <= cached.top:
        return None
    if cached.tree.size and _stored_root(cached.top) != cached.tree.root():
        return None
    new = LogEntry.objects.filter(index__gt=cached.top).order_by("index").values_list("index", "leaf_hash")
    tree = merkle.Tree()
    tree.levels = [list(level) for level in cached.tree.levels]  # another thread may still read the old one
    for index, leaf in new:
        if index != tree.size:
            return None
        tree.append(bytes(leaf))
    return _Cached(tree, top) if tree.size == count and tree.root() == state.root else None


def _read_all() -> _Cached:
    tree, positions, top = merkle.Tree(), {}, -1
    for index, leaf in LogEntry.objects.order_by("index").values_list("index", "leaf_hash").iterator(chunk_size=5000):
        positions[index] = tree.size
        tree.append(bytes(leaf))
        top = index
    gapless = all(index == place for index, place in positions.items())
    return _Cached(tree, top, None if gapless else positions)


def log_checkpoint() -> str:
    """Return the latest signed checkpoint ("" before the first entry)."""
    return LogHead.objects.filter(pk=1).values_list("checkpoint", flat=True).first() or ""


def entry_for(*, certificate: str) -> LogEntry | None:
    """Return the log entry a certificate is known by: its id (its current file's entry) or its file's SHA-256."""
    found = LogEntry.objects.filter(kind="certificate").select_related("certificate").defer("entry", "certificate__document")
    if certificate.isdigit() and len(certificate) < 64:  # 64 digits is a SHA-256 that happens to hold no letters
        return found.filter(certificate_id=int(certificate)).order_by("-index").first()
    return found.filter(entry_sha256=certificate.lower()).order_by("index").first()


class NotUnderCheckpoint(Exception):
    """The entry is not in the tree the latest checkpoint signed (the log changed under the registry)."""


def inclusion_proof(*, entry: LogEntry, tree: LogTree, size: int, checkpoint: str) -> entries.InclusionProof:
    """Return the proof that the log of `size` holds `entry`; NotUnderCheckpoint when it does not."""
    position = tree.positions.get(entry.index, size) if tree.positions is not None else entry.index
    if position >= size:
        raise NotUnderCheckpoint(f"Log entry {entry.index} is not under the latest checkpoint, of size {size}.")
    proof = tree.tree.inclusion_proof(position, size)
    return {"index": position, "size": size, "proof": entries.encoded(proof), "checkpoint": checkpoint}


def entry_proof(*, entry: LogEntry) -> entries.EntryProof:
    """Return an entry's inclusion proof against the latest checkpoint, and its revocation's, if it was revoked."""
    tree = log_tree()
    checkpoint = tree.checkpoint
    size = min(tree.tree.size, _checkpoint_size(checkpoint))
    revoked = _revocation_of(entry) if entry.certificate.revoked_at is not None else None
    revocation: entries.RevokedEntry | None = None
    if revoked is not None:
        with contextlib.suppress(NotUnderCheckpoint):  # revoked after the latest checkpoint: shown by the next
            inclusion = inclusion_proof(entry=revoked, tree=tree, size=size, checkpoint=checkpoint)
            revocation = {"statement": bytes(revoked.entry).decode(), "inclusion": inclusion}
    return {
        "kind": "certificate" if entry.kind == "certificate" else "revocation",
        "entry_sha256": entry.entry_sha256,
        "inclusion": inclusion_proof(entry=entry, tree=tree, size=size, checkpoint=checkpoint),
        "revocation": revocation,
    }


def _revocation_of(entry: LogEntry) -> LogEntry | None:
    """Return the logged revocation that names the certificate file `entry` holds, if any: a /2 statement names every
    file signed for the run, a /1 statement only the file that was newest when it was revoked."""
    candidates = LogEntry.objects.filter(kind="revocation", certificate_id=entry.certificate_id, index__gt=entry.index)
    return next((found for found in candidates.order_by("index") if _names(found, entry.entry_sha256)), None)


def _names(revocation: LogEntry, certificate_sha256: str) -> bool:
    try:
        return certificate_sha256 in entries.revocation_read(bytes(revocation.entry).decode())["certificate_sha256s"]
    except (merkle.ProofError, UnicodeDecodeError):  # a statement this code cannot read names nothing it can show
        return False


def certificate_files(*, certificate: Certificate) -> list[str]:
    """Return the SHA-256 of every file signed for the certificate's run, oldest first: each one logged, and the
    current file (one issued before the log and not yet backfilled has no entry)."""
    logged = LogEntry.objects.filter(kind="certificate", certificate=certificate).order_by("index")
    found = list(dict.fromkeys(logged.values_list("entry_sha256", flat=True)))
    current = entries.entry_sha256(certificate.document.encode())
    return found if current in found else [*found, current]


def log_entries(*, start: int, end: int) -> list[entries.LoggedEntry]:
    """Return the entries at places `start` to `end` - 1 of the tree (at most MAX_ENTRIES of them). A private
    workload's certificate is withheld, its SHA-256 alone given: enough to hold the entry to the tree, and no more."""
    rows = LogEntry.objects.order_by("index").select_related("certificate__run").defer("certificate__document")
    return [_logged(place, row) for place, row in enumerate(rows[start : min(end, start + entries.MAX_ENTRIES)], start)]


def _logged(place: int, row: LogEntry) -> entries.LoggedEntry:
    private = row.kind == "certificate" and row.certificate.run.workload_id is not None
    shown = None if private else base64.b64encode(bytes(row.entry)).decode()
    kind: Literal["certificate", "revocation"] = "revocation" if row.kind == "revocation" else "certificate"
    return {"index": place, "kind": kind, "entry_sha256": row.entry_sha256, "entry": shown}


def _checkpoint_size(signed: str) -> int:
    try:
        return checkpoint.parse(note.split(signed)[0]).size
    except note.NoteInvalid:
        return 0
