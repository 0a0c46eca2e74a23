"""The certificate keys you trust, per server: known_keys.json beside the config file.

A server's key is recorded the first time `spechub verify` asks it, and from then on its
certificates are checked against the recorded key and issuer; the server is never asked again.
A server that rotates its key must be trusted again on purpose: remove its entry (after checking
the new key some other way), or verify with --public-key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spechub.client import SpecHubError, config_file

MAX_BYTES = 1024 * 1024  # a pinned key is about 200 bytes a server
FIX = "remove the file (or the broken entry) and verify again to pin each server's key"


def path() -> Path:
    return config_file().with_name("known_keys.json")


def read() -> dict[str, dict[str, str]]:
    """The pinned keys by server URL ({} before the first)."""
    return read_private(path(), max_bytes=MAX_BYTES, fix=FIX, what="a JSON object of servers, each an object")


def write(ring: dict[str, dict[str, str]]) -> None:
    write_private(path(), ring)


def read_private(found: Path, *, max_bytes: int, fix: str, what: str) -> dict[str, dict[str, str]]:
    """A client file of trust kept per server (this one, logbook's, monitor's): {} before the first; refused, saying how
    to fix it, where others may write it, or it is too large, not JSON, or not an object of objects."""
    if not found.exists():
        return {}
    if not found.is_file():
        raise SpecHubError(0, "client:config-invalid", f"{found} is not a file: {fix}")
    if found.stat().st_mode & 0o022:
        raise SpecHubError(0, "client:config-unsafe",
                           f"{found} is writable by others, who could plant what you trust: chmod 600 {found}")  # fmt: skip
    try:
        with found.open("rb") as stream:
            data = stream.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValueError(f"more than {max_bytes // 2**20} MiB, which no such file is")
        kept: Any = json.loads(data)
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise SpecHubError(0, "client:config-invalid", f"{found}: {exc}; {fix}") from None
    except RecursionError:  # nested deeper than the parser's stack: no such file is
        raise SpecHubError(0, "client:config-invalid", f"{found}: its JSON is nested too deeply to read; {fix}") from None
    if not isinstance(kept, dict) or not all(isinstance(entry, dict) for entry in kept.values()):
        raise SpecHubError(0, "client:config-invalid", f"{found}: expected {what}; {fix}")
    return kept


def write_private(target: Path, kept: Mapping[str, Mapping[str, object]]) -> None:
    """Replace the file whole (written beside it, then renamed), readable by you alone."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_suffix(".tmp")
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        json.dump(kept, stream, indent=2, sort_keys=True)
    staged.replace(target)
