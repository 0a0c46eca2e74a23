"""Every entry of each server's log that `spechub log watch` read, and the revocations among them:
known_revocations.json beside known_checkpoints.json.

A registry's inclusion answer says whether a certificate was revoked, and a registry that wants a revocation
forgotten can leave it out. So the watcher reads every entry the log gained since it last read it (from the size it
read up to, up to the checkpoint it just held to the last), holds them to that checkpoint's root, and keeps each
revocation it finds. `spechub verify` then says REVOKED for a file a kept revocation names, whatever the inclusion
answer says. What it keeps of the tree is its frontier: the few hashes from which the next entries lead to the next
root, so no entry is read twice and none can be shown differently the second time.

A private workload's certificate is withheld by the registry (its SHA-256 alone is served), as everywhere else: it is
held to the tree, not read.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernel.transparency import checkpoint, entries, merkle
from spechub import keyring
from spechub.client import Client, SpecHubError

MAX_BYTES = 16 * 1024 * 1024
FIX = "remove the file (or the server's entry) and run `spechub log watch` again to read the server's log from its start"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def path() -> Path:
    return keyring.path().with_name("known_revocations.json")


@dataclass(frozen=True)
class Kept:
    """A revocation read from the log: the statement as logged, where, and when this client read it."""

    index: int
    statement: str
    read_at: str


@dataclass(frozen=True)
class Read:
    """How far this client read one server's log: `size` entries, the tree's frontier there, the revocations found."""

    size: int = 0
    frontier: list[bytes] = field(default_factory=list)
    read_at: str = ""
    revocations: dict[str, Kept] = field(default_factory=dict)  # by the SHA-256 of each certificate file revoked


@dataclass
class Reading:
    """One reading of a log's new entries: from `start` to `end` - 1, the revocations among them, those withheld."""

    start: int
    end: int
    read_at: str
    revocations: dict[str, Kept] = field(default_factory=dict)
    withheld: int = 0  # private workloads' certificates, served by their SHA-256 alone


def read() -> dict[str, Read]:
    """What was read of each server's log, by server URL ({} before the first watch); refused, naming this file as
    the one to fix, when it is damaged."""
    found = path()
    kept: dict[str, dict[str, Any]] = keyring.read_private(found, max_bytes=MAX_BYTES, fix=FIX, what="an object of servers")
    try:
        return {url: _read_one(entry) for url, entry in kept.items()}
    except (AttributeError, KeyError, TypeError, ValueError) as damaged:  # binascii.Error is a ValueError
        raise SpecHubError(0, "client:config-invalid", f"{found}: an entry is damaged ({damaged!s:.200}): this file on your "
                           f"machine, not the server's answer; {FIX}") from None  # fmt: skip


def _read_one(entry: dict[str, Any]) -> Read:
    size, frontier = entry["size"], [base64.b64decode(node, validate=True) for node in entry["frontier"]]
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError("size is not a whole number")
    merkle.Frontier(size, frontier)  # ValueError unless its hashes are a tree of that size
    revocations = {sha: _kept(each) for sha, each in entry["revocations"].items()}
    if not all(_SHA256.fullmatch(sha) for sha in revocations):
        raise ValueError("a revoked file is not named by its SHA-256")
    return Read(size, frontier, str(entry["read_at"]), revocations)


def _kept(each: dict[str, Any]) -> Kept:
    if not (isinstance(each["index"], int) and isinstance(each["statement"], str)):
        raise TypeError("a revocation's index or statement")
    return Kept(each["index"], each["statement"], str(each.get("read_at", "")))


def write(kept: dict[str, Read]) -> None:
    keyring.write_private(path(), {url: _written(done) for url, done in kept.items()})


def _written(done: Read) -> dict[str, object]:
    revocations = {sha: {"index": k.index, "statement": k.statement, "read_at": k.read_at} for sha, k in done.revocations.items()}
    frontier = [base64.b64encode(node).decode() for node in done.frontier]
    return {"size": done.size, "frontier": frontier, "read_at": done.read_at, "revocations": revocations}


def revocation_kept(url: str, certificate_sha256: str) -> tuple[Kept, entries.Revocation] | None:
    """The revocation of the file read from `url`'s log, and the statement read; None when none was read."""
    kept = read().get(url)
    found = kept.revocations.get(certificate_sha256) if kept else None
    if found is None:
        return None
    try:
        return found, entries.revocation_of(found.statement, certificate_sha256)
    except merkle.ProofError as damaged:
        raise SpecHubError(0, "client:config-invalid", f"{path()}: the revocation kept for this file is damaged ({damaged}): "
                           f"this file on your machine, not the server's answer; {FIX}") from None  # fmt: skip


def log_read(client: Client, signed: checkpoint.Checkpoint) -> Reading:
    """Read the entries of the log after those read before, up to the checkpoint `signed` (its signature and its
    consistency with the last one checked already); hold them to its root and keep the revocations among them.
    Return what this reading found. Raise ProofError when the entries are not the log that checkpoint signs."""
    everything = read()
    before = everything.get(client.base_url) or Read()
    if before.size > signed.size:
        raise merkle.ProofError(f"the log shrank: you read {before.size} entries of it on {before.read_at}, and its "
                                f"checkpoint now signs {signed.size}")  # fmt: skip
    frontier = merkle.Frontier(before.size, before.frontier)
    reading = Reading(before.size, signed.size, datetime.now(UTC).isoformat(timespec="seconds"))
    while frontier.size < signed.size:
        page = client.log_entries(frontier.size, signed.size)
        if page["start"] != frontier.size or not page["entries"]:
            raise merkle.ProofError(f"asked for the log's entries from {frontier.size}, the server answered none of them")
        for entry in page["entries"][: signed.size - frontier.size]:
            frontier.append(_leaf(entry, frontier.size, reading))
    if frontier.root() != signed.root:
        raise merkle.ProofError(f"the log's entries {before.size} to {signed.size - 1} do not lead to the root its checkpoint "
                                "signs: the server showed entries other than those it logged")  # fmt: skip
    revocations = {**reading.revocations, **before.revocations}  # the first revocation of a file is the one kept
    everything[client.base_url] = Read(frontier.size, frontier.hashes, reading.read_at, revocations)
    write(everything)
    return reading


def _leaf(entry: entries.LoggedEntry, place: int, found: Reading) -> bytes:
    """The entry's leaf hash, computed here from what was served; a revocation among them is kept in `found`."""
    if entry["index"] != place:
        raise merkle.ProofError(f"asked for the log's entry {place}, the server answered with entry {entry['index']}")
    if entry["entry"] is None:  # withheld: a private workload's certificate, by the server's word
        if not _SHA256.fullmatch(entry["entry_sha256"]):
            raise merkle.ProofError(f"entry {place}: a withheld entry's SHA-256 is 64 hex digits")
        found.withheld += 1
        return merkle.leaf_hash(bytes.fromhex(entry["entry_sha256"]))
    try:
        data = base64.b64decode(entry["entry"], validate=True)
    except binascii.Error:
        raise merkle.ProofError(f"entry {place} is not base64") from None
    if entries.is_revocation(data):
        _keep(data, place, found)
    return entries.entry_leaf(data)


def _keep(data: bytes, place: int, found: Reading) -> None:
    try:
        statement = data.decode()
        revocation = entries.revocation_read(statement)
    except (UnicodeDecodeError, merkle.ProofError) as unread:
        raise merkle.ProofError(f"entry {place} is a revocation this spechub cannot read ({unread}): a newer spechub may "
                                "read it") from None  # fmt: skip
    for sha in revocation["certificate_sha256s"]:
        found.revocations.setdefault(sha, Kept(place, statement, found.read_at))


def said(reading: Reading) -> str:
    """What a reading found, for `spechub log watch` to print."""
    statements = {kept.index for kept in reading.revocations.values()}
    found = f"read entries {reading.start} to {reading.end - 1}" if reading.end > reading.start else "no new entries"
    revoked = f", {len(statements)} revocation(s) of {len(reading.revocations)} certificate file(s)" if statements else ""
    withheld = f", {reading.withheld} private certificate(s) withheld" if reading.withheld else ""
    return f"{found}{revoked}{withheld}; revocations kept in {path()}"
