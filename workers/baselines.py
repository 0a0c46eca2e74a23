"""The verifier-alone greedy outputs, cached and reused for every draft of that verifier, on any worker; and the
server flags the build refused for the verifier alone (the smoke tier's engine features), learned once.

The key holds everything that changes them: the verifier's commit, the engine
build, the hardware class, the suite's content hash and the engine conditions
(dtype, maximum length, eager mode, seed). Timings are never cached: speed is
timed afresh in every run, baseline beside speculative.

Where they are kept: SPECHUB_BASELINE_STORE, a redis:// URL every worker node reaches (the
broker's Redis serves, on a database of its own), so a baseline measured on one node is reused
on all; without it, a directory on this node (SPECHUB_BASELINE_CACHE), for a single machine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from kernel import settings
from kernel.builds import installed_engine_build
from kernel.spec import RunSpec


def cache_dir() -> Path:
    return settings.current().baseline_cache


def key(spec: RunSpec, suite_sha256: str, *, served: bool = False) -> str:
    """Return the cache key of the verifier-alone measurements a run with `spec` on that suite would take: `served`
    one request at a time by the published server, or by an offline engine in batches (the arithmetic may differ)."""
    identity = {
        **({"outputs": "served one request at a time"} if served else {}),
        "verifier": [spec.verifier.repo_id, spec.verifier.sha],
        "engine": [spec.engine, installed_engine_build(spec.engine)],
        "hardware": spec.hardware,
        "suite": suite_sha256,
        "conditions": asdict(spec.plan.conditions),
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def refusal_key(spec: RunSpec, flags: Sequence[str]) -> str:
    """Return the key of the verifier alone's refusal to start with these server flags: the build's, whatever the
    draft and the suite, so it is learned once per verifier, build, hardware and conditions."""
    return key(spec, "server flags: " + " ".join(flags))


REDIS_PREFIX = "spechub:baseline:"
logger = logging.getLogger(__name__)


def _shared() -> Any:
    """Return a Redis client for the shared store, or None to keep baselines on this node."""
    url = settings.current().baseline_store
    if not url:
        return None
    import redis

    return redis.Redis.from_url(url, socket_timeout=10)


def load(digest: str) -> object | None:
    """Return the measurements stored under `digest` as they were stored, or None."""
    shared = _shared()
    try:
        raw = shared.get(REDIS_PREFIX + digest) if shared is not None else (cache_dir() / f"{digest}.json").read_bytes()
        loaded: object = json.loads(raw) if raw is not None else None
    except FileNotFoundError:  # not measured yet on this node
        return None
    except (OSError, ValueError, RedisError):  # an unreadable store costs a measurement, never a run
        logger.warning("baseline %s not read from the store; measuring it", digest[:12], exc_info=True)
        return None
    return loaded


def store(digest: str, measured: object) -> None:
    """Write atomically (one Redis SET, or a rename), so a crash never leaves half a baseline to be reused."""
    shared = _shared()
    if shared is not None:
        try:
            shared.set(REDIS_PREFIX + digest, json.dumps(measured))
        except RedisError:  # the run's own figures stand; the next run measures the baseline again
            logger.warning("baseline %s not kept in the store", digest[:12], exc_info=True)
        return
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{digest}.{os.getpid()}.tmp"
    partial.write_text(json.dumps(measured))
    partial.replace(directory / f"{digest}.json")
