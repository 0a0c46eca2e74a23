"""The log's checkpoints you have seen, per server: known_checkpoints.json beside known_keys.json.

As ssh keeps known_hosts, the client keeps the newest checkpoint each server showed it (after checking its
signature, and that it extends the one kept before), and holds every later checkpoint to it: a server that
rewrote or shrank its log, or shows you a log another client never saw, cannot then prove consistency.
`spechub log watch` does the same on a schedule: a witness a team or a vendor can run.
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

from kernel.transparency import audit, checkpoint, merkle, note
from spechub import keyring
from spechub.client import Client, SpecHubError

MAX_BYTES = 4 * 1024 * 1024
FIX = "remove the file (or the server's entry) to start again from the server's next checkpoint"
LogFailure = (merkle.ProofError, note.NoteInvalid)


def path() -> Path:
    return keyring.path().with_name("known_checkpoints.json")


def read() -> dict[str, dict[str, str]]:
    """The kept checkpoints by server URL: {"checkpoint": the signed note, "seen_at": when}."""
    found = path()
    kept = keyring.read_private(found, max_bytes=MAX_BYTES, fix=FIX, what="an object of servers, each with a checkpoint")
    if not all(isinstance(entry.get("checkpoint"), str) for entry in kept.values()):
        raise SpecHubError(0, "client:config-invalid", f"{found}: expected an object of servers, each with a checkpoint; {FIX}")
    return kept


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
        old = audit.read_signed(before["checkpoint"], origin, key)
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


def watch(client: Client, args: argparse.Namespace, key: Ed25519PublicKey, issuer: str) -> int:
    """Fetch the checkpoint every --every seconds (--count times), holding each to the last; 1 on the first failure."""
    origin = checkpoint.origin_of(issuer)
    fetched = 0
    while args.count is None or fetched < args.count:
        if fetched:
            time.sleep(args.every)
        fetched += 1
        signed = client.log_checkpoint()["checkpoint"]
        try:
            since = advance(client, signed, origin=origin, key=key)
            size = audit.read_signed(signed, origin, key).size
        except LogFailure as failed:
            print(f"LOG NOT CONSISTENT: {client.base_url}: {failed}", file=sys.stderr)
            return 1
        kept = f"consistent with the checkpoint you saw on {since}" if since else "the first checkpoint seen, kept"
        print(f"{datetime.now(UTC).isoformat(timespec='seconds')} {origin}: size {size}, {kept}", flush=True)
    return 0
