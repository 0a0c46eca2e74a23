"""The log's checkpoints you have seen, per server: known_checkpoints.json beside known_keys.json.

As ssh keeps known_hosts, the client keeps the newest checkpoint each server showed it (after checking its
signature, and that it extends the one kept before), and holds every later checkpoint to it: a server that
rewrote or shrank its log, or shows you a log another client never saw, cannot then prove consistency.
`spechub log watch` does the same on a schedule, and reads every entry the log gained (spechub.monitor): a witness
and a monitor a team or a vendor can run, which keeps the revocations `spechub verify` then holds each file to.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from kernel import plain
from kernel.transparency import audit, checkpoint, merkle, note
from spechub import keyring, monitor
from spechub.client import Client, SpecHubError

MAX_BYTES = 4 * 1024 * 1024
FIX = "remove the file (or the server's entry) to start again from the server's next checkpoint"
LogFailure = (merkle.ProofError, note.NoteInvalid)


def path() -> Path:
    return keyring.path().with_name("known_checkpoints.json")


def read() -> dict[str, dict[str, str]]:
    """The kept checkpoints by server URL: {"checkpoint": the signed note, "seen_at": when}; refused, naming this file
    as the one to fix, when an entry is damaged."""
    found = path()
    kept = keyring.read_private(found, max_bytes=MAX_BYTES, fix=FIX, what="an object of servers, each with a checkpoint")
    for url, entry in kept.items():
        missing = [name for name in ("checkpoint", "seen_at") if not isinstance(entry.get(name), str)]
        if missing:
            raise damaged(f"the entry for {plain.shown(url)[:200]} has no {' or '.join(missing)}")
    return kept


def damaged(what: str) -> SpecHubError:
    """The error for a known_checkpoints.json this client cannot use: the file on this machine is at fault."""
    return SpecHubError(0, "client:config-invalid", f"{path()}: {what}. This file on your machine is damaged (or was "
                        f"kept under another key); the server is not at fault: {FIX}")  # fmt: skip


def write(kept: dict[str, dict[str, str]]) -> None:
    keyring.write_private(path(), kept)


@dataclass(frozen=True)
class Seen:
    """What the log showed: where the file is, and the checkpoint it was held to."""

    index: int
    size: int
    since: str | None  # when the client first kept the checkpoint it was held to; None on first sight
    revocation: dict[str, object] | None


def advance(client: Client, signed: str, *, origin: str, key: Ed25519PublicKey) -> str | None:
    """Hold the checkpoint `signed` to the one kept for this server and keep the newer; return when the kept one was
    seen (None on first sight). Raise ProofError or NoteInvalid when the log is not consistent with it."""
    new = audit.read_signed(signed, origin, key)
    kept = read()
    before = kept.get(client.base_url)
    if before is not None:
        old = _kept_checkpoint(before["checkpoint"], origin, key, client.base_url)
        if old.size > new.size:
            raise merkle.ProofError(f"the log shrank: you saw {old.size} entries on {before['seen_at']}, it now shows {new.size}")
        proof = client.log_consistency(old.size, new.size) if old.size < new.size else None
        try:
            audit.check_consistency(old, new, proof)
        except merkle.ProofError as failed:
            raise merkle.ProofError(f"not consistent with the checkpoint you saw on {before['seen_at']}: {failed}") from None
        if old.size == new.size:
            return before["seen_at"]
    now = datetime.now(UTC).isoformat(timespec="seconds")
    write({**kept, client.base_url: {"checkpoint": signed, "seen_at": now}})
    return None if before is None else before["seen_at"]


def _kept_checkpoint(signed: str, origin: str, key: Ed25519PublicKey, url: str) -> checkpoint.Checkpoint:
    try:
        return audit.read_signed(signed, origin, key)
    except note.NoteInvalid as failed:
        raise damaged(f"the checkpoint kept for {url} does not verify under the key you trust for it ({failed})") from None


def check_file(client: Client, data: bytes, *, issuer: str, key: Ed25519PublicKey) -> Seen:
    """Check that the log holds `data` under a signed checkpoint consistent with the one kept; raise on a failure."""
    origin = checkpoint.origin_of(issuer)
    answer = client.log_inclusion(hashlib.sha256(data).hexdigest())
    included = audit.check_inclusion(data, answer, origin=origin, key=key)
    since = advance(client, included.signed, origin=origin, key=key)
    revoked = dict(included.revocation) if included.revocation else None
    return Seen(included.index, included.checkpoint.size, since, revoked)


def said(seen: Seen) -> str:
    where = f"included at index {seen.index} of a log of size {seen.size}"
    if seen.since is None:
        return f"{where}; the first checkpoint you have seen from this server, kept in {path()}"
    return f"{where}, consistent with the checkpoint you saw on {seen.since}"


def wiped(client: Client) -> str | None:
    """Say so when this client kept something of the server's log, which now answers that it is empty (404): a log
    only grows, so it was wiped or replaced; None when nothing was kept, and an empty log is only new."""
    kept, read_before = read().get(client.base_url), monitor.read().get(client.base_url)
    if kept is not None:
        held = f"you kept a checkpoint of it on {kept['seen_at']}"
    elif read_before is not None and read_before.size:
        held = f"you read {read_before.size} entries of it on {read_before.read_at}"
    else:
        return None
    return (f"LOG NOT CONSISTENT: {client.base_url} answers that its transparency log is empty, but {held}: a log only "
            f"grows, so this one was wiped or replaced. Trust nothing it proves now; if its operator says the log was "
            f"started again, remove the server's entry from {path()} and {monitor.path()}")  # fmt: skip


def watch(client: Client, args: argparse.Namespace, key: Ed25519PublicKey, issuer: str) -> int:
    """Fetch the checkpoint every --every seconds (--count times), hold each to the last, and read the entries it added
    (spechub.monitor); 1 on the first failure."""
    origin = checkpoint.origin_of(issuer)
    fetched = 0
    while args.count is None or fetched < args.count:
        if fetched:
            time.sleep(args.every)
        fetched += 1
        if failed := _watched(client, origin, key):
            return failed
    return 0


def _watched(client: Client, origin: str, key: Ed25519PublicKey) -> int:
    """One checkpoint held to the last and its new entries read; print what was found, and return 1 on a failure."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        signed = client.log_checkpoint()["checkpoint"]
    except SpecHubError as refused:
        if refused.status != 404:
            raise
        return _empty(client, f"{now} {origin}")
    try:
        since = advance(client, signed, origin=origin, key=key)
        latest = audit.read_signed(signed, origin, key)
        reading = monitor.log_read(client, latest)
    except LogFailure as failed:
        print(f"LOG NOT CONSISTENT: {client.base_url}: {plain.shown(failed)}", file=sys.stderr)
        return 1
    except SpecHubError as refused:
        if refused.status != 404:
            raise
        print(f"LOG NOT READ: {client.base_url} signs a checkpoint but serves no entries of its log "
              f"({plain.shown(refused.message)}): the revocations in it cannot be read", file=sys.stderr)  # fmt: skip
        return 1
    kept = f"consistent with the checkpoint you saw on {since}" if since else "the first checkpoint seen, kept"
    print(f"{now} {origin}: size {latest.size}, {kept}; {monitor.said(reading)}", flush=True)
    return 0


def _empty(client: Client, where: str) -> int:
    """The log answers that it is empty: 1 when this client kept some of it (wiped or replaced), else 0, a new log."""
    found = wiped(client)
    if found is not None:
        print(found, file=sys.stderr)
        return 1
    print(f"{where}: the log is empty; nothing to hold to yet", flush=True)
    return 0
