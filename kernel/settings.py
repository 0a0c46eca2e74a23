"""The kernel's and the workers' settings: the one module on their side that touches the process environment.

The registry reads its settings through Django (`registry/settings.py`), which takes the shared ones (the local
state folder, the Hub cache) from here, so both sides agree on every default. `current()` reads the environment
once per process; code is handed the `Settings` it needs, or asks `current()` at its entry point.
`tests/test_layers.py` fails on any other module of kernel/ or workers/ that reads `os.environ`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Settings:
    var_dir: Path  # SPECHUB_VAR_DIR: local state (logs, server records, hand-offs); var/ at the checkout's root
    hub_endpoint: str | None  # HF_ENDPOINT: a Hub-protocol mirror; None for huggingface.co
    hub_cache: Path  # SPECHUB_HUB_CACHE: where pinned snapshots are kept, on the registry and the workers alike
    hub_token: str | bool  # SPECHUB_HUB_READ_TOKEN, else HF_TOKEN; False (never None: see kernel.hub) for none
    workload_dir: Path  # SPECHUB_WORKLOAD_DIR: where the certify task leaves a user's sample for the worker
    baseline_cache: Path  # SPECHUB_BASELINE_CACHE: verifier-alone measurements kept on this node
    baseline_store: str | None  # SPECHUB_BASELINE_STORE: a Redis URL sharing them between nodes
    start_log: Path | None  # SPECHUB_START_LOG: where engine, server and certification starts are recorded
    # SPECHUB_CPU_PRELOAD: the libraries every vLLM process on CPU preloads, of workers.preload.LIBRARIES ("none": none)
    cpu_preload: tuple[str, ...] = ()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        def given(name: str) -> str | None:
            return (environ.get(name) or "").strip() or None

        var = Path(given("SPECHUB_VAR_DIR") or ROOT / "var")
        start_log = given("SPECHUB_START_LOG")
        return cls(
            var_dir=var,
            hub_endpoint=given("HF_ENDPOINT"),
            hub_cache=Path(given("SPECHUB_HUB_CACHE") or var / "hub-cache"),
            hub_token=given("SPECHUB_HUB_READ_TOKEN") or given("HF_TOKEN") or False,
            workload_dir=Path(given("SPECHUB_WORKLOAD_DIR") or var / "workloads"),
            baseline_cache=Path(given("SPECHUB_BASELINE_CACHE") or Path.home() / ".cache" / "spechub" / "baselines"),
            baseline_store=given("SPECHUB_BASELINE_STORE"),
            start_log=Path(start_log) if start_log else None,
            cpu_preload=_names(given("SPECHUB_CPU_PRELOAD") or DEFAULT_CPU_PRELOAD),
        )


# vLLM's CPU guide asks for both. The A/B in docs/measuring.md ("Preloaded libraries", three runs of each) found Intel
# OpenMP's peak 0.75 GiB lower every time and no difference in speed either could tell from the noise: OpenMP only.
DEFAULT_CPU_PRELOAD = "iomp"


def _names(given: str) -> tuple[str, ...]:
    return () if given == "none" else tuple(name.strip() for name in given.split(",") if name.strip())


@functools.cache
def current() -> Settings:
    """This process's settings, read from its environment the first time they are asked for."""
    return Settings.from_environment()


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment a child process (an engine's server) starts with: this process's, with `extra` on top."""
    return {**os.environ, **extra}


def preloaded() -> str:
    """The LD_PRELOAD this process has now: the libraries its children inherit (a forked one, loaded already)."""
    return os.environ.get("LD_PRELOAD", "")


def export(name: str, value: str, *, keep_given: bool = False) -> None:
    """Set a variable an in-process engine reads (vLLM reads its own settings from the environment).

    keep_given: leave a value the operator set alone, so a default does not override it."""
    if keep_given:
        os.environ.setdefault(name, value)
    else:
        os.environ[name] = value
