"""A client's checks of the log's answers: a certificate file's inclusion under a signed checkpoint, its
revocation, and consistency between two checkpoints. Each failure raises ProofError or NoteInvalid saying what
failed; nothing here trusts the server beyond the key the caller already trusts."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from kernel.transparency import checkpoint, entries, merkle


@dataclass(frozen=True)
class Included:
    index: int
    checkpoint: checkpoint.Checkpoint
    signed: str  # the checkpoint note as the server signed it, to keep
    revocation: entries.Revocation | None


def check_inclusion(data: bytes, answer: entries.EntryProof, *, origin: str, key: Ed25519PublicKey) -> Included:
    """Return where `data` (a certificate file) sits in the log, once the proof and the checkpoint hold."""
    sha256 = hashlib.sha256(data).hexdigest()
    if answer["entry_sha256"] != sha256 or answer["kind"] != "certificate":
        raise merkle.ProofError("the log answered for another entry than this certificate file")
    inclusion = answer["inclusion"]
    signed = inclusion["checkpoint"]
    found = _included(entries.entry_leaf(data), inclusion, origin=origin, key=key)
    revocation = None
    if answer["revocation"] is not None:
        revoked = answer["revocation"]
        if revoked["inclusion"]["checkpoint"] != signed:
            raise merkle.ProofError("the revocation is proved against another checkpoint than the certificate")
        _included(entries.entry_leaf(revoked["statement"].encode()), revoked["inclusion"], origin=origin, key=key)
        revocation = entries.revocation_of(revoked["statement"], sha256)
    return Included(inclusion["index"], found, signed, revocation)


def _included(leaf: bytes, inclusion: entries.InclusionProof, *, origin: str, key: Ed25519PublicKey) -> checkpoint.Checkpoint:
    signed = checkpoint.open_checkpoint(inclusion["checkpoint"], origin, key)
    if inclusion["size"] != signed.size:
        raise merkle.ProofError(f"the proof is for a log of size {inclusion['size']}, the checkpoint for {signed.size}")
    merkle.verify_inclusion(leaf, inclusion["index"], signed.size, entries.hashes(inclusion["proof"]), signed.root)
    return signed


def check_consistency(old: checkpoint.Checkpoint, new: checkpoint.Checkpoint, proof: entries.ConsistencyProof | None) -> None:
    """Check that `new` extends `old` (no proof is needed, or asked for, when the sizes are equal)."""
    if old.origin != new.origin:
        raise merkle.ProofError(f"the checkpoints are of two logs, {old.origin!r} and {new.origin!r}")
    hashes: list[bytes] = []
    if proof is not None:
        if (proof["from_size"], proof["to_size"]) != (old.size, new.size):
            raise merkle.ProofError("the consistency proof is for other sizes than the two checkpoints")
        hashes = entries.hashes(proof["proof"])
    merkle.verify_consistency(old.size, new.size, old.root, new.root, hashes)


def read_signed(signed: str, origin: str, key: Ed25519PublicKey) -> checkpoint.Checkpoint:
    """Return a stored or fetched checkpoint note's content once its signature holds."""
    return checkpoint.open_checkpoint(signed, origin, key)
