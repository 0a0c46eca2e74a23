"""Reading a stored document of any version as the current one.

Version history:
- 1: the first document.
- 2: `environment.engine_build` names the engine build the figures were measured on.
- 3: speed is measured against two servers in paired blocks (`throughput.mode` "serving"):
  each level carries its block ratios, requests/s and TTFT/TPOT/ITL/E2E percentiles in ms;
  the throughput stage adds the servers' commands, a Poisson rate point, the machine's load
  and the served counters checked against the offline ones. Version 2's offline figures
  are read as mode "offline", with the percentiles it had. Later, still version 3 because
  readers need not change: the verdict may carry `properties` (each property judged and
  attributed) and `qualification` (the engine qualification it cites), and a `smoke` stage
  may hold the serving-feature grid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kernel.builds import engine_build as build_among
from kernel.result.schema import (
    LATENCIES,
    PERCENTILES,
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    Environment,
    Level,
    Rates,
    ResultDocument,
    Stages,
    Throughput,
)


class UnreadableResult(ValueError):
    """The document is not a result document this code can read."""


def load(raw: Mapping[str, Any] | None) -> ResultDocument | None:
    """Return `raw` as a current result document (upgrading older versions); None for no document."""
    if not raw:
        return None
    version = raw.get("schema_version")
    # An integer: true and 1.0 equal 1 in a set, and were read as version 1.
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise UnreadableResult(f"Result schema_version {version!r}; this code reads {sorted(READABLE_VERSIONS)} (an integer).")
    document = cast(ResultDocument, {"spec": {}, "stages": {}, "workloads": {}, "environment": {}, **raw})
    if version == 1:
        document = _from_v1(document)
    if version in (1, 2):
        document = _from_v2(document)
    return document


def _from_v1(document: ResultDocument) -> ResultDocument:
    """Version 1 named the engine build only through the package versions; name it as version 2 does."""
    environment: Environment = {**document["environment"]}
    environment.setdefault("engine_build", build_among(document["spec"].get("engine", ""), environment.get("versions", {})))
    return {**document, "schema_version": 2, "environment": environment}


def _from_v2(document: ResultDocument) -> ResultDocument:
    """Version 2 timed offline waves: keep its figures, say so, and move its percentiles (seconds) into ms."""
    old: Mapping[str, Any] = document["stages"].get("throughput") or {}
    if "levels" not in old:
        return {**document, "schema_version": SCHEMA_VERSION}
    levels = {name: _level_from_v2(level) for name, level in old["levels"].items()}
    extra = {"mode": "offline", "servers": None, "rate_point": None, "load": None, "counters": None}
    stages: Stages = {**document["stages"], "throughput": cast(Throughput, {**old, "levels": levels, **extra})}
    return {**document, "schema_version": SCHEMA_VERSION, "stages": stages}


def _level_from_v2(level: Mapping[str, Any]) -> Level:
    """Move a version-2 level's percentiles (seconds, under flat keys) into version 3's `latency_ms`."""

    def rates(old: Mapping[str, Any]) -> Rates:
        def ms(key: str) -> float | None:
            return old[key] * 1000 if old.get(key) is not None else None

        latency = {name: dict.fromkeys(f"p{q}" for q in PERCENTILES) for name in LATENCIES}
        latency["ttft"]["p50"], latency["itl"]["p50"], latency["itl"]["p95"] = ms("ttft_p50"), ms("itl_p50"), ms("itl_p95")
        kept = {key: value for key, value in old.items() if key not in ("ttft_p50", "itl_p50", "itl_p95")}
        return cast(Rates, {"tokens_per_second_runs": [], **kept, "requests_per_second": None, "latency_ms": latency})

    sides = {side: rates(level[side]) for side in ("baseline", "speculative") if side in level}
    return cast(Level, {"block_ratios": [], "requests_per_block": 0, **level, **sides})
