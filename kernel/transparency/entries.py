"""What the log holds and what its answers look like: shared by the registry, which serves them, and the client.

Every entry's leaf is RFC 6962's leaf hash of the SHA-256 of its bytes: for a certificate, the signed file
exactly as issued; for a revocation, the statement below (canonical JSON naming the certificate file's SHA-256,
the reason, who revoked it and when). The certificate stays in the log; the revocation is appended after it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Literal, TypedDict

from kernel.transparency.merkle import HASH_SIZE, ProofError, leaf_hash

REVOCATION_FORMAT = "spechub-revocation/1"
MAX_PROOF_HASHES = 64  # a proof in a log of 2**63 entries is at most 63 hashes


class Revocation(TypedDict):
    format: str
    certificate_sha256: str  # the SHA-256 of the certificate file revoked
    serial: int  # the certificate's serial (its run)
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
    """Return a logged revocation statement once it is one and names the certificate; raise ProofError."""
    try:
        found = json.loads(statement)
    except (ValueError, RecursionError):
        raise ProofError("the revocation statement is not JSON") from None
    keys = set(Revocation.__annotations__)
    if not isinstance(found, dict) or set(found) != keys or found.get("format") != REVOCATION_FORMAT:
        raise ProofError(f"the revocation statement is not a {REVOCATION_FORMAT} statement")
    if found["certificate_sha256"] != certificate_sha256:
        raise ProofError("the revocation statement names another certificate")
    return found  # type: ignore[return-value]  # its keys checked above


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
