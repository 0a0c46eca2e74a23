"""The verifier-alone greedy outputs, cached on disk and reused for every draft of that verifier.

The key holds everything that changes them: the verifier's commit, the engine
build, the hardware class, the suite's content hash and the engine conditions
(dtype, maximum length, eager mode, seed). Timings are never cached: speed is
timed afresh in every run, baseline beside speculative.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from kernel.builds import installed_engine_build
from kernel.spec import RunSpec


def cache_dir() -> Path:
    return Path(os.environ.get("SPECHUB_BASELINE_CACHE", Path.home() / ".cache" / "spechub" / "baselines"))


def key(spec: RunSpec, suite_sha256: str) -> str:
    """Return the cache key of the verifier-alone measurements a run with `spec` on that suite would take."""
    identity = {
        "verifier": [spec.verifier.repo_id, spec.verifier.sha],
        "engine": [spec.engine, installed_engine_build(spec.engine)],
        "hardware": spec.hardware,
        "suite": suite_sha256,
        "conditions": asdict(spec.plan.conditions),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def load(digest: str) -> object | None:
    """Return the measurements stored under `digest` as they were stored, or None."""
    path = cache_dir() / f"{digest}.json"
    try:
        loaded: object = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded


def store(digest: str, measured: object) -> None:
    """Write atomically, so a crash never leaves half a baseline to be reused."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{digest}.{os.getpid()}.tmp"
    partial.write_text(json.dumps(measured))
    partial.replace(directory / f"{digest}.json")
