"""C2SP tlog-checkpoints (c2sp.org/tlog-checkpoint): a log's origin, size and root hash, as a signed note.

    spechub.example/log
    10
    <base64 root hash>

    — spechub.example/log <base64 key id and signature>

The registry signs one under its own key, named by the origin, so witnesses and other note tools can read it.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from kernel.transparency import note
from kernel.transparency.merkle import HASH_SIZE

_DECIMAL = re.compile(r"^(0|[1-9][0-9]{0,18})$")


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        """Return the checkpoint's body, the text its note signs."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode(), *self.extensions]
        return "".join(f"{line}\n" for line in lines)


def origin_of(issuer: str) -> str:
    """Return the log's origin for a registry at `issuer` (its URL): the URL without its scheme, and /log."""
    parts = urlsplit(issuer)
    return note.check_name(f"{parts.netloc}{parts.path.rstrip('/')}/log")


def sign(checkpoint: Checkpoint, private_key: Ed25519PrivateKey) -> str:
    """Return the checkpoint as a note signed under its origin."""
    return note.sign(checkpoint.text(), checkpoint.origin, private_key)


def parse(text: str) -> Checkpoint:
    """Return the checkpoint a note's text holds; raise NoteInvalid when it is not one."""
    lines = text.split("\n")[:-1]
    if len(lines) < 3:
        raise note.NoteInvalid("a checkpoint has an origin, a size and a root hash, one a line")
    origin, size, root, *extensions = lines
    if not origin or not _DECIMAL.fullmatch(size):
        raise note.NoteInvalid("a checkpoint's origin is non-empty and its size a decimal number without leading zeros")
    try:
        raw = base64.b64decode(root, validate=True)
    except binascii.Error:
        raise note.NoteInvalid("a checkpoint's root hash is not base64") from None
    if len(raw) != HASH_SIZE:
        raise note.NoteInvalid(f"a checkpoint's root hash is {HASH_SIZE} bytes, not {len(raw)}")
    return Checkpoint(origin, int(size), raw, tuple(extensions))


def open_checkpoint(signed: str, origin: str, public_key: Ed25519PublicKey) -> Checkpoint:
    """Return the checkpoint in `signed` once its signature by the log's key verifies and it names `origin`."""
    found = parse(note.open_note(signed, origin, public_key))
    if found.origin != origin:
        raise note.NoteInvalid(f"the checkpoint is for the log {found.origin!r}, not {origin!r}")
    return found
