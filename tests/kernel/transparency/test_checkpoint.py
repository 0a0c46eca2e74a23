"""Checkpoints and signed notes, read by a reader written here from the C2SP specs' text
(c2sp.org/tlog-checkpoint, c2sp.org/signed-note), and against the Go note package's published example."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kernel.transparency import checkpoint, merkle, note


def c2sp_read(signed: str, verifier_key: str) -> tuple[str, int, bytes]:
    """A checkpoint reader from the specs' text: the note is its text, a blank line, and lines
    "— <name> <base64(key ID || signature)>"; an Ed25519 verifier key is "<name>+<hex key ID>+<base64(0x01 || key)>",
    the key ID SHA-256(name || 0x0A || 0x01 || key)[:4]; the text is origin, decimal size and base64 root, a line each."""
    name, key_hex, encoded = verifier_key.split("+", 2)  # the key's base64 may hold "+"
    raw = base64.b64decode(encoded)
    assert raw[0] == 0x01 and len(raw) == 33
    assert hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4].hex() == key_hex
    text, signatures = signed.rsplit("\n\n", 1)
    text += "\n"
    verified = False
    for line in signatures.removesuffix("\n").split("\n"):
        dash, signer, blob = line.split(" ")
        assert dash == "\u2014"
        sig = base64.b64decode(blob)
        if signer == name and sig[:4].hex() == key_hex:
            Ed25519PublicKey.from_public_bytes(raw[1:]).verify(sig[4:], text.encode())
            verified = True
    assert verified
    origin, size, root, *_ = text.split("\n")
    assert origin and re.fullmatch(r"0|[1-9][0-9]*", size)
    return origin, int(size), base64.b64decode(root, validate=True)


def test_a_checkpoint_reads_with_a_reader_written_from_the_c2sp_specs():
    origin = checkpoint.origin_of("https://spechub.example")
    tree = merkle.Tree(merkle.leaf_hash(b"%d" % i) for i in range(5))
    for _ in range(32):  # keys whose base64 holds "+" or "/" among them
        key = Ed25519PrivateKey.generate()
        signed = checkpoint.sign(checkpoint.Checkpoint(origin, 5, tree.root()), key)
        assert c2sp_read(signed, note.verifier_key(origin, key.public_key())) == ("spechub.example/log", 5, tree.root())
        assert checkpoint.open_checkpoint(signed, origin, key.public_key()).root == tree.root()


def test_notes_verify_the_go_note_packages_example_and_skip_a_witness_cosignature():
    verifier_key = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(verifier_key.split("+", 2)[2])[1:])
    text = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
    signature = "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
    signed = f"{text}\n\u2014 PeterNeumann {signature}\n"
    assert note.verifier_key("PeterNeumann", public) == verifier_key
    witness = note.sign(text, "witness.example", Ed25519PrivateKey.generate()).rsplit("\n\n", 1)[1]
    assert note.open_note(signed + witness, "PeterNeumann", public) == text


def test_a_changed_or_foreign_checkpoint_is_refused_saying_why():
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    signed = checkpoint.sign(checkpoint.Checkpoint("spechub.example/log", 3, b"\x01" * 32), key)
    changed = signed.replace("\n3\n", "\n4\n", 1)
    with pytest.raises(note.NoteInvalid, match="changed after signing"):
        checkpoint.open_checkpoint(changed, "spechub.example/log", key.public_key())
    with pytest.raises(note.NoteInvalid, match="no signature by"):
        checkpoint.open_checkpoint(signed, "spechub.example/log", other.public_key())
    for hostile in ("", "\n\n", "a\n\n\u2014 a b\n", "x" * 70000, signed.replace("\u2014", "-")):
        with pytest.raises(note.NoteInvalid):
            checkpoint.open_checkpoint(hostile, "spechub.example/log", key.public_key())


def test_the_key_id_is_the_c2sp_one():
    key = Ed25519PrivateKey.generate().public_key()
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert note.key_id("log.example", key) == hashlib.sha256(b"log.example\n\x01" + raw).digest()[:4]
