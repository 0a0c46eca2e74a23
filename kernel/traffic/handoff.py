"""How a user's sample travels from the registry to the worker measuring it: one file a run, in one typed form.

The run spec names the workload by its hash (`sha256:<hex>`); the prompts travel beside the spec, never in it.
The registry writes the sample it stored, already rendered with the verifier's chat template and measured; the
worker reads it back as it is, with no format detection, sampling, hashing or rendering of its own.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernel import settings
from kernel.errors import UserError
from kernel.traffic.requests import Request, StoredRequest

# A run spec names a registry workload by its hash; the prompts travel to the worker beside the spec, never in it.
REFERENCE = re.compile(r"sha256:([0-9a-f]{64})")


def workload_dir() -> Path:
    """Where the certify task leaves a registry workload for the worker measuring it (the registry and workers agree)."""
    return settings.current().workload_dir


def workload_path(sha256: str, run_id: int) -> Path:
    """Run `run_id`'s copy of a registry workload: one file a run, so a run ending never removes another's."""
    return workload_dir() / f"{sha256}.run{run_id}.json"


def workload_run_of(path: Path) -> int | None:
    """The run a file in workload_dir belongs to (its copy, or the copy being written), or None for another file.

    `.jsonl` is the form copies had before the hand-off took one typed form: a worker starting still clears them."""
    found = re.fullmatch(r"[0-9a-f]{64}\.run(\d+)\.(?:json|jsonl|part)", path.name)
    return int(found[1]) if found else None


@dataclass(frozen=True)
class Sample:
    """A registry workload's stored sample, as the worker measures it."""

    sha256: str
    requests: tuple[Request, ...]


def write_sample(path: Path, sha256: str, requests: Sequence[StoredRequest]) -> None:
    """Write a stored sample (rows of `Request.as_dict`) for a worker, owner-only, whole or not at all."""
    partial = path.with_suffix(".part")
    body = json.dumps({"sha256": sha256, "requests": list(requests)}, ensure_ascii=False)
    try:
        with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as out:
            out.write(body)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def read_sample(path: Path) -> Sample:
    """Read back what `write_sample` wrote; a missing or unreadable file is the run's error, named."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return Sample(document["sha256"], tuple(Request.from_dict(row) for row in document["requests"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError("run:invalid-spec", f"The workload hand-off {path.name} cannot be read: {exc}.") from exc
