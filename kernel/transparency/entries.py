"""What the log holds and what its answers look like: shared by the registry, which serves them, and the client.

Every entry's leaf is RFC 6962's leaf hash of the SHA-256 of its bytes: for a certificate, the signed file
exactly as issued; for a revocation, the statement below (canonical JSON naming, by SHA-256, every certificate file
signed for the run, the reason, who revoked it and when). The certificate stays in the log; the revocation is
appended after it. A spechub-revocation/1 statement, logged before a run judged again could have two files, named
one file; it is still read, as a statement naming that file alone.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Literal, TypedDict, cast

from kernel.transparency.merkle import HASH_SIZE, ProofError, leaf_hash

REVOCATION_FORMAT = "spechub-revocation/2"
REVOCATION_FORMAT_V1 = "spechub-revocation/1"  # named one file; logged before a run judged again was revoked whole
REVOCATION_PREFIX = "spechub-revocation/"
MAX_PROOF_HASHES = 64  # a proof in a log of 2**63 entries is at most 63 hashes
MAX_REVOKED_FILES = 1000  # a run is judged again once per engine build it is qualified on
MAX_ENTRIES = 100  # a page of GET /api/v1/log/entries
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class Revocation(TypedDict):
    """A revocation statement (spechub-revocation/2), and how a /1 statement reads: its one file in the list."""

    format: str
    certificate_sha256s: list[str]  # the SHA-256 of each certificate file signed for the run, oldest first
    serial: int  # the certificate's serial (its run)
    reason: str
    revoked_by: str
    revoked_at: str


class _RevocationV1(TypedDict):
    """A spechub-revocation/1 statement: it named one file, the run's newest."""

    format: str
    certificate_sha256: str
    serial: int
    reason: str
    revoked_by: str
    revoked_at: str


class InclusionProof(TypedDict):
    """An entry's place in the log and the proof that the checkpoint's tree holds it."""

    index: int
    size: int
    proof: list[str]  # base64 hashes, nearest sibling first (RFC 9162's inclusion path)
    checkpoint: str  # the signed checkpoint of `size` the proof leads to


class RevokedEntry(TypedDict):
    """A revocation in the log, with its statement as logged and its inclusion proof."""

    statement: str
    inclusion: InclusionProof


class EntryProof(TypedDict):
    """GET /api/v1/log/proof/inclusion: an entry's inclusion proof, and its revocation when it was revoked."""

    kind: Literal["certificate", "revocation"]
    entry_sha256: str
    inclusion: InclusionProof
    revocation: RevokedEntry | None


class LoggedEntry(TypedDict):
    """One entry of the log, at its place in the tree the checkpoints sign."""

    index: int
    kind: Literal["certificate", "revocation"]  # what the registry says it is; a client reads the bytes instead
    entry_sha256: str
    entry: str | None  # the entry's bytes in base64; null for a private workload's certificate, which is withheld


class EntryPage(TypedDict):
    """GET /api/v1/log/entries: the entries from `start`, in the log's order, up to the end asked for (a page may
    stop short of it; ask again from where it stopped)."""

    start: int
    entries: list[LoggedEntry]


class ConsistencyProof(TypedDict):
    """GET /api/v1/log/proof/consistency: the proof that the log of `to` extends the log of `from`."""

    from_size: int
    to_size: int
    proof: list[str]
    checkpoint: str  # the latest signed checkpoint


def entry_sha256(entry: bytes) -> str:
    return hashlib.sha256(entry).hexdigest()


def entry_leaf(entry: bytes) -> bytes:
    """Return the leaf hash of a logged entry: RFC 6962's leaf hash of the entry's SHA-256."""
    return leaf_hash(hashlib.sha256(entry).digest())


def revocation_bytes(revocation: Revocation) -> bytes:
    """Return the one byte form of a revocation statement: canonical JSON, as certificates' payloads are."""
    return json.dumps(revocation, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def revocation_of(statement: str, certificate_sha256: str) -> Revocation:
    """Return a logged revocation statement once it is one and names the certificate file; raise ProofError."""
    found = revocation_read(statement)
    if certificate_sha256 not in found["certificate_sha256s"]:
        raise ProofError("the revocation statement names another certificate")
    return found


def revocation_read(statement: str) -> Revocation:
    """Return a logged revocation statement (/2, or /1 read as naming its one file); raise ProofError."""
    try:
        found = json.loads(statement)
    except (ValueError, RecursionError):
        raise ProofError("the revocation statement is not JSON") from None
    if isinstance(found, dict) and found.get("format") == REVOCATION_FORMAT_V1:
        found = _keys_checked(found, _RevocationV1)
        found["certificate_sha256s"] = [found.pop("certificate_sha256")]
    elif not isinstance(found, dict) or found.get("format") != REVOCATION_FORMAT:
        raise ProofError(f"the revocation statement is not a {REVOCATION_FORMAT} (or /1) statement")
    named = _keys_checked(found, Revocation)["certificate_sha256s"]
    if not (isinstance(named, list) and 0 < len(named) <= MAX_REVOKED_FILES and all(map(_is_sha256, named))):
        raise ProofError(f"a revocation statement names 1 to {MAX_REVOKED_FILES} certificate files by SHA-256")
    return cast(Revocation, found)


def is_revocation(entry: bytes) -> bool:
    """Return whether a logged entry is a revocation statement, of any version: a certificate file never names one."""
    try:
        found = json.loads(entry)
    except (ValueError, RecursionError):
        return False
    return isinstance(found, dict) and str(found.get("format", "")).startswith(REVOCATION_PREFIX)


def _keys_checked(found: dict[str, object], shape: type) -> dict[str, object]:
    """Return `found` once it has exactly the keys of `shape`, its text fields strings and its serial a number."""
    if set(found) != set(shape.__annotations__):
        raise ProofError(f"the revocation statement is not a {found.get('format')} statement: its keys differ")
    texts = ("format", "reason", "revoked_by", "revoked_at", "certificate_sha256")
    if any(not isinstance(found[key], str) for key in texts if key in found):
        raise ProofError("a revocation statement's format, reason, revoker and time are strings")
    if isinstance(found["serial"], bool) or not isinstance(found["serial"], int):
        raise ProofError("a revocation statement's serial is a whole number")
    return found


def _is_sha256(text: object) -> bool:
    return isinstance(text, str) and bool(_SHA256.fullmatch(text))


def hashes(encoded: object) -> list[bytes]:
    """Return the hashes of a proof sent as base64 strings; raise ProofError when it is not one."""
    if not isinstance(encoded, list) or len(encoded) > MAX_PROOF_HASHES:
        raise ProofError(f"a proof is a list of at most {MAX_PROOF_HASHES} base64 hashes")
    found = []
    for text in encoded:
        try:
            raw = base64.b64decode(str(text), validate=True)
        except binascii.Error:
            raise ProofError("a proof's hash is not base64") from None
        if len(raw) != HASH_SIZE:
            raise ProofError(f"a proof's hash is {HASH_SIZE} bytes, not {len(raw)}")
        found.append(raw)
    return found


def encoded(proof: list[bytes]) -> list[str]:
    return [base64.b64encode(node).decode() for node in proof]
