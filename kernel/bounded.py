"""Work on hostile input run in a forked child with a CPU, memory and wall-clock bound.

A chat template is a program: nested `range` loops multiply (10^6 iterations took 2.8 s, 10^10 is a few lines), and
`'a' * 10**9` is a string Jinja's sandbox does not refuse. Jinja gives no hook per iteration, and a loop that prints
nothing yields nothing, so no bound can be kept from inside the render. The child gets RLIMIT_CPU and RLIMIT_AS and is
killed at the wall-clock deadline; what it returns comes back as JSON (never pickle), and a child that died or ran out
of time is `Exceeded`, with what it ran out of. Where the platform cannot fork, the work runs in-process, unbounded.
Pure of Django: the registry's web tier and the workers call it alike.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from kernel.errors import UserError

MAX_ANSWER_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Budget:
    """What one bounded call may spend: CPU seconds, memory beyond what the process holds, and wall seconds."""

    cpu_seconds: int = 1
    memory_bytes: int = 512 * 2**20
    wall_seconds: float = 5.0


class Exceeded(Exception):
    """The child spent its budget, or died: `spent` says which (cpu, memory, time, answer, died)."""

    def __init__(self, spent: str) -> None:
        super().__init__(spent)
        self.spent = spent


def run(work: Callable[[], object], budget: Budget) -> object:
    """Return `work()`'s JSON value, computed in a child held to `budget`; a UserError it raises is raised here."""
    if not hasattr(os, "fork"):
        return work()
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its coverage is not collected
        os.close(reading)
        _child(work, budget, writing)
    os.close(writing)
    try:
        answer = _read(reading, pid, time.monotonic() + budget.wall_seconds)
    finally:
        os.close(reading)
        status = _reap(pid)
    return _answer(answer, status)


def _child(work: Callable[[], object], budget: Budget, writing: int) -> None:  # pragma: no cover - runs in the child
    """Compute under the limits, write the answer, and leave without running the parent's exit handlers."""
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU's default action dumps core
        resource.setrlimit(resource.RLIMIT_CPU, (budget.cpu_seconds, budget.cpu_seconds + 1))
        held = _address_space()
        if held:
            resource.setrlimit(resource.RLIMIT_AS, (held + budget.memory_bytes, held + budget.memory_bytes))
        payload = {"value": work()}
    except UserError as refused:
        payload = {"code": refused.code, "detail": refused.detail}
    except MemoryError:
        payload = {"spent": "memory"}
    except BaseException as exc:  # noqa: BLE001 - any failure of hostile work is an answer, never the parent's crash
        payload = {"spent": "died", "error": f"{type(exc).__name__}: {exc}"[:500]}
    try:
        with os.fdopen(writing, "wb") as out:
            out.write(json.dumps(payload).encode())
    finally:
        os._exit(0)


def _address_space() -> int:
    """The child's mapped bytes now (a fork holds all of its parent's), or 0 where /proc does not say."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _read(reading: int, pid: int, deadline: float) -> bytes | None:
    """The child's whole answer, or None where it ran past `deadline` or past MAX_ANSWER_BYTES (and is killed)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        ready = select.select([reading], [], [], max(left, 0))[0] if left > 0 else []
        if not ready:
            os.kill(pid, signal.SIGKILL)
            return None
        chunk = os.read(reading, 2**20)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            os.kill(pid, signal.SIGKILL)
            raise Exceeded("answer")
        chunks.append(chunk)


def _reap(pid: int) -> int:
    return os.waitpid(pid, 0)[1]


def _answer(answer: bytes | None, status: int) -> object:
    if answer is None:
        raise Exceeded("time")
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
        raise Exceeded("cpu")
    if not answer:
        raise Exceeded("died")
    payload = json.loads(answer)
    if "code" in payload:
        raise UserError(payload["code"], payload["detail"])
    if "spent" in payload:
        raise Exceeded(payload["spent"])
    return payload["value"]
