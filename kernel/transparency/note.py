"""C2SP signed notes (c2sp.org/signed-note) with Ed25519 keys: sign a text, and verify one from a key you trust.

A signed note is the text (UTF-8, each line ending in a newline), a blank line, then one line per signature:
`— <key name> <base64(4-byte key id || signature)>`. An Ed25519 key's id is the first four bytes of
SHA-256(key name || 0x0A || 0x01 || public key), and its signature covers the text alone. A verifier skips
signatures by keys it does not know (a witness's cosignature, say) and needs one by the key it trusts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ED25519 = b"\x01"  # the signature type byte C2SP gives Ed25519
DASH = "\u2014"  # an em dash starts each signature line
MAX_NOTE_BYTES = 64 * 1024
MAX_SIGNATURES = 100
_NAME = re.compile(r"^[^\s+]+$")


class NoteInvalid(Exception):
    """The note is malformed, or no signature on it is by the key it must be signed by."""


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: bytes
    signature: bytes


def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(name: str, public_key: Ed25519PublicKey) -> bytes:
    """Return the 4-byte id C2SP gives an Ed25519 key under `name`."""
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + _raw(public_key)).digest()[:4]


def verifier_key(name: str, public_key: Ed25519PublicKey) -> str:
    """Return the verifier key string witnesses and note tools read: name+hex(key id)+base64(0x01 || key)."""
    return f"{name}+{key_id(name, public_key).hex()}+{base64.b64encode(ED25519 + _raw(public_key)).decode()}"


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"a key name must be non-empty, with no spaces and no '+': {name[:80]!r}")
    return name


def sign(text: str, name: str, private_key: Ed25519PrivateKey) -> str:
    """Return `text` as a note signed by `private_key` under `name`."""
    _check_text(text)
    ident = key_id(check_name(name), private_key.public_key())
    signature = base64.b64encode(ident + private_key.sign(text.encode())).decode()
    return f"{text}\n{DASH} {name} {signature}\n"


def open_note(note: str, name: str, public_key: Ed25519PublicKey) -> str:
    """Return the text of `note` once a signature by `public_key` under `name` verifies; raise NoteInvalid."""
    text, signatures = split(note)
    ident = key_id(name, public_key)
    for found in signatures:
        if found.name == name and found.key_id == ident:
            try:
                public_key.verify(found.signature, text.encode())
            except InvalidSignature:
                raise NoteInvalid(f"the signature by {name} does not match the note: it was changed after signing") from None
            return text
    raise NoteInvalid(f"the note carries no signature by {name} (key id {ident.hex()})")


def split(note: str) -> tuple[str, list[Signature]]:
    """Return a note's text and its signature lines, parsed; raise NoteInvalid when it is not a signed note."""
    if len(note.encode()) > MAX_NOTE_BYTES:
        raise NoteInvalid(f"a note is at most {MAX_NOTE_BYTES} bytes")
    cut = note.rfind("\n\n")
    if cut < 0 or not note.endswith("\n"):
        raise NoteInvalid("a signed note is its text, a blank line, and signature lines, each ending in a newline")
    text, lines = note[: cut + 1], note[cut + 2 : -1].split("\n")
    _check_text(text)
    if len(lines) > MAX_SIGNATURES:
        raise NoteInvalid(f"more than {MAX_SIGNATURES} signatures on one note")
    return text, [_signature(line) for line in lines]


def _signature(line: str) -> Signature:
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != DASH or not _NAME.fullmatch(parts[1]):
        raise NoteInvalid(f"a signature line is '{DASH} <name> <base64>': {line[:80]!r}")
    try:
        raw = base64.b64decode(parts[2], validate=True)
    except binascii.Error:
        raise NoteInvalid(f"the signature by {parts[1]} is not base64") from None
    if len(raw) < 5:
        raise NoteInvalid(f"the signature by {parts[1]} is too short to hold a key id and a signature")
    return Signature(parts[1], raw[:4], raw[4:])


def _check_text(text: str) -> None:
    if not text.endswith("\n") or "\n\n" in text or text.startswith("\n"):
        raise NoteInvalid("a note's text is non-empty lines, each ending in a newline")
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise NoteInvalid("a note's text holds no control characters but newlines")
