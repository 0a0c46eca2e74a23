"""The verifier-alone measurements, cached on disk and reused for every draft of that verifier.

The key holds everything that changes them: the verifier's commit, the engine
build, the hardware class, the suite's content hash and the measuring plan.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.certification import Workbench


def cache_dir() -> Path:
    return Path(os.environ.get("SPECHUB_BASELINE_CACHE", Path.home() / ".cache" / "spechub" / "baselines"))


def key(bench: Workbench) -> str:
    plan = asdict(bench.spec.plan)
    plan.pop("thresholds")
    identity = {
        "verifier": [bench.spec.verifier.repo_id, bench.spec.verifier.sha],
        "engine": [bench.spec.engine, engine_build(bench.spec.engine)],
        "hardware": bench.spec.hardware,
        "suite": bench.suite.sha256,
        "plan": plan,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def engine_build(engine: str) -> str:
    """Return the version of the library that runs `engine`."""
    if engine == "vllm":
        import vllm

        return str(vllm.__version__)
    import torch

    return str(torch.__version__)


def load(digest: str) -> dict[str, Any] | None:
    path = cache_dir() / f"{digest}.json"
    try:
        loaded: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded


def store(digest: str, measured: dict[str, Any]) -> None:
    """Write atomically, so a crash never leaves half a baseline to be reused."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{digest}.{os.getpid()}.tmp"
    partial.write_text(json.dumps(measured))
    partial.replace(directory / f"{digest}.json")
