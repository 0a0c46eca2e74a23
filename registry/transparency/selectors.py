"""Reads of the transparency log: the tree as the database holds it, proofs from it, and the latest checkpoint.

Each process keeps the leaves it has read in a Merkle tree (kernel.transparency.merkle), so a proof reads O(log n)
hashes from memory. Before each use the tree is held to the database, in one query of O(log n) work: the newest
entry's index and the root it stored, and the head's count of rewrites, must match what the tree was read at, or the
new entries are read and appended to it, or, when anything else changed (an entry gone or changed, a transaction
rolled back), the whole log is read again. A database trigger counts every statement that changes or removes entries
(UPDATE, DELETE, TRUNCATE: the registry itself only inserts them), so a row removed behind the registry's back
changes the next checkpoint, which clients then refuse. The entries are also counted, O(n), at most every
COUNT_EVERY seconds per process: a removal with the trigger dropped or disabled is noticed within that window.
"""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Literal

from django.db import connection

from kernel.transparency import checkpoint, entries, merkle, note
from registry.models import Certificate, LogEntry, LogHead

COUNT_EVERY = 30.0  # seconds: the most a removal that bypassed the trigger goes unnoticed by a process


@dataclass
class _Cached:
    """The tree a process holds, appended to in place under _lock (readers hold views), and what it was read at."""

    tree: merkle.Tree
    top: int  # the newest entry's index the tree holds
    root: bytes | None  # the root that entry stored
    rewrites: int  # the head's count of rewrites when the tree was read
    positions: dict[int, int] | None  # index -> place in the tree, only when the indexes have a gap
    counted_at: float  # when the entries were last counted and matched the tree (time.monotonic)


_lock = threading.Lock()
_cached = _Cached(merkle.Tree(), -1, None, 0, None, float("-inf"))


@dataclass(frozen=True)
class LogTree:
    tree: merkle.Tree  # a read-only view: another thread may append to the process's tree meanwhile
    top: int
    positions: dict[int, int] | None
    checkpoint: str  # the latest signed checkpoint, read with the tree ("" before the first entry)


@dataclass(frozen=True)
class _State:
    top: int
    root: bytes | None  # what the newest entry stored as the log's root
    rewrites: int
    checkpoint: str
    count: int | None  # the number of entries, when they were counted this time


def log_tree() -> LogTree:
    """Return the log's tree as the database holds it now, and the latest checkpoint."""
    global _cached
    counting = time.monotonic() - _cached.counted_at >= COUNT_EVERY
    state = _state(counting=counting)
    with _lock:
        if not _matches(_cached, state):
            _cached = _extended(_cached, state) or _read_all(state)
        elif counting:
            _cached.counted_at = time.monotonic()
        return LogTree(_cached.tree.view(), _cached.top, _cached.positions, state.checkpoint)


def _state(*, counting: bool) -> _State:
    """Read, in one query, what the cached tree is held to: the newest entry and its root, the head, and when
    `counting`, the number of entries (the only part whose cost grows with the log)."""
    quote = connection.ops.quote_name
    entries_table, head_table, index = quote(LogEntry._meta.db_table), quote(LogHead._meta.db_table), quote("index")
    count = f"(SELECT COUNT(*) FROM {entries_table})" if counting else "NULL"  # noqa: S608 - names
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT MAX({index}) FROM {entries_table}), "  # noqa: S608 - names
            f"(SELECT root_hash FROM {entries_table} ORDER BY {index} DESC LIMIT 1), "
            f"(SELECT rewrites FROM {head_table} WHERE id = 1), (SELECT checkpoint FROM {head_table} WHERE id = 1), {count}"
        )
        top, root, rewrites, signed, counted = cursor.fetchone()
    return _State(-1 if top is None else top, None if root is None else bytes(root), rewrites or 0, signed or "", counted)


def _matches(cached: _Cached, state: _State) -> bool:
    if (cached.top, cached.root, cached.rewrites) != (state.top, state.root, state.rewrites):
        return False
    return state.count is None or state.count == cached.tree.size


def _stored_root(index: int) -> bytes | None:
    found = LogEntry.objects.filter(index=index).values_list("root_hash", flat=True).first()
    return None if found is None else bytes(found)


def _extended(cached: _Cached, state: _State) -> _Cached | None:
    """Return the cached tree with the entries after it appended, when nothing before them changed; None otherwise.

    The new entries are checked against the root the newest stored before the tree takes them, so a failed check
    leaves the tree as the views other threads hold saw it."""
    if cached.top < 0 or state.top <= cached.top or state.rewrites != cached.rewrites or state.root is None:
        return None  # an empty tree is read whole: a level at a time, not an entry at a time
    if _stored_root(cached.top) != cached.root:
        return None
    # Up to the top read with the state: an entry committed since would not match its root.
    new = LogEntry.objects.filter(index__gt=cached.top, index__lte=state.top).order_by("index")
    found = [(index, bytes(leaf)) for index, leaf in new.values_list("index", "leaf_hash")]
    if not _lead_to(cached, found, state):
        return None
    for index, leaf in found:
        if cached.positions is not None:
            cached.positions[index] = cached.tree.size
        cached.tree.append(leaf)
    counted_at = time.monotonic() if state.count is not None else cached.counted_at
    return _Cached(cached.tree, state.top, state.root, state.rewrites, cached.positions, counted_at)


def _lead_to(cached: _Cached, found: list[tuple[int, bytes]], state: _State) -> bool:
    """Return whether the cached tree with `found` appended is the state's: its root, and its count when counted."""
    frontier = cached.tree.frontier()
    for place, (index, leaf) in enumerate(found, cached.tree.size):
        if cached.positions is None and index != place:
            return False  # a gap: the whole log is read again, with positions
        frontier.append(leaf)
    return frontier.root() == state.root and state.count in (None, frontier.size)


def _read_all(state: _State) -> _Cached:
    """Return the tree of every entry up to the state's newest, read in one pass (counted first: O(n), once)."""
    quote = connection.ops.quote_name
    entries_table, index = quote(LogEntry._meta.db_table), quote("index")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*), MIN({index}) FROM {entries_table} WHERE {index} <= %s", [state.top])  # noqa: S608
        count, low = cursor.fetchone()
        gapless = count == state.top + 1 and low in (0, None)
        read = "leaf_hash" if gapless else f"leaf_hash, {index}"  # a gap's positions need the indexes too
        cursor.execute(f"SELECT {read} FROM {entries_table} WHERE {index} <= %s ORDER BY {index}", [state.top])  # noqa: S608
        leaves, indexes = bytearray(), []
        while rows := cursor.fetchmany(20_000):
            leaves += b"".join([bytes(row[0]) for row in rows])
            indexes += [] if gapless else [row[1] for row in rows]
    positions = None if gapless else {found: place for place, found in enumerate(indexes)}
    tree = merkle.Tree.built(leaves)
    return _Cached(tree, state.top, state.root, state.rewrites, positions, time.monotonic())


def log_checkpoint() -> str:
    """Return the latest signed checkpoint ("" before the first entry)."""
    return LogHead.objects.filter(pk=1).values_list("checkpoint", flat=True).first() or ""


def entry_for(*, certificate: str) -> LogEntry | None:
    """Return the log entry a certificate is known by: its id (its current file's entry) or its file's SHA-256."""
    # Only what a proof reads: compiling and loading the two whole rows was a third of a proof request's time.
    shown = ("index", "kind", "certificate", "entry_sha256", "certificate__revoked_at")
    found = LogEntry.objects.filter(kind="certificate").select_related("certificate").only(*shown)
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
