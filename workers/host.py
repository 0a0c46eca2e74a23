"""The host a figure was measured on: the CPU's model and the vector extensions the engine could use.

The same toy certification gave ±4.7 % in 251 s on an Intel host with AVX-512 and ±16-25 % in 537-761 s on an AMD
host without it (issue 51): on CPU, the host is part of the figure, and `x86_64` does not name it.
"""

from __future__ import annotations

import platform
from pathlib import Path

# The flags (as /proc/cpuinfo spells them) that decide which kernels vLLM's CPU backend and torch can run.
VECTOR_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo; empty where there is none (not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def cpu_model() -> str:
    """The CPU's model name ("Intel(R) Xeon(R) Platinum 8481C"), or the platform's word for it where none is known."""
    return _cpuinfo().get("model name") or platform.processor() or platform.machine()


def vector_extensions() -> list[str]:
    """Which of VECTOR_FLAGS the CPU has, in VECTOR_FLAGS' order."""
    flags = set(_cpuinfo().get("flags", "").split())
    return [flag for flag in VECTOR_FLAGS if flag in flags]


def torch_capability() -> str | None:
    """The vector level torch dispatches its CPU kernels at ("AVX512", "AVX2", "DEFAULT"): what the engine used."""
    try:
        import torch
    except ImportError:
        return None
    return str(torch.backends.cpu.get_cpu_capability())
