"""What a self-hosted worker says of its machine when it registers: shown on its runs' pages and in the API, never
judged. It is read once at registration, against these types, so that every later page can show it (issue 52 §1).

workers/remote.py writes it with every field; the registry reads it partial, and older workers' devices by name alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from kernel.typed import mismatch, unstorable


class Device(TypedDict, total=False):
    name: str
    memory: int  # bytes


class HardwareEvidence(TypedDict, total=False):
    platform: str
    cpus: int | None
    engine_build: str | None
    devices: list[Device | str]  # where torch sees CUDA devices, as it sees them; older workers named them alone


class UnreadableEvidence(ValueError):
    """Evidence whose fields are not of their types; the message names the field."""


def readable(raw: Mapping[str, Any]) -> HardwareEvidence:
    """Return `raw` as the machine's evidence, or raise UnreadableEvidence naming the field no page could show."""
    if wrong := unstorable(raw, "evidence") or mismatch(raw, HardwareEvidence, "evidence", partial=True):
        raise UnreadableEvidence(wrong)
    return cast(HardwareEvidence, dict(raw))
