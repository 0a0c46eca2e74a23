"""Engines plug in by dotted path; the director resolves the name it is given lazily."""

from __future__ import annotations

import importlib

from kernel.errors import InfraError
from workers.engines.base import Engine

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
