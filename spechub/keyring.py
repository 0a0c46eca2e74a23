"""The certificate keys you trust, per server: known_keys.json beside the config file.

A server's key is recorded the first time `spechub verify` asks it, and from then on its
certificates are checked against the recorded key and issuer; the server is never asked again.
A server that rotates its key must be trusted again on purpose: remove its entry (after checking
the new key some other way), or verify with --public-key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from spechub.client import SpecHubError, config_file


def path() -> Path:
    return config_file().with_name("known_keys.json")


def read() -> dict[str, dict[str, str]]:
    """The pinned keys by server URL ({} before the first)."""
    found = path()
    if not found.is_file():
        return {}
    if found.stat().st_mode & 0o022:
        raise SpecHubError(0, "client:config-unsafe",
                           f"{found} is writable by others, who could plant their key: chmod 600 {found}")  # fmt: skip
    try:
        ring: Any = json.loads(found.read_text())
    except (OSError, ValueError) as exc:
        raise SpecHubError(0, "client:config-invalid", f"{found}: {exc}") from None
    if not isinstance(ring, dict):
        raise SpecHubError(0, "client:config-invalid", f"{found}: expected a JSON object of servers")
    return ring


def write(ring: dict[str, dict[str, str]]) -> None:
    """Replace the file whole (written beside it, then renamed), readable by you alone."""
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_suffix(".tmp")
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        json.dump(ring, stream, indent=2, sort_keys=True)
    staged.replace(target)
