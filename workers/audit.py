"""What a process started: each vLLM engine and server, the reference engine, and each certification.

Set SPECHUB_START_LOG to a file path to keep the record; unset, nothing is written. Operators read what a run
cost from it, and the tests print a summary of theirs. One short line per event, written with O_APPEND, so
processes that share the file never interleave within a line.

A certification also keeps its own starts (issue 62 §2): while a stage runs, `counting` holds the run's list, and
each engine or server start joins it with its stage and, once it answers, its seconds. The result document lists
them (workers/certification.py's verdict), and the run page shows them.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from kernel import result, settings

KINDS = ("engine", "server", "reference", "certification")


@dataclass
class Start:
    """One engine or server start: what it is, the stage that started it, when it began and when it answered."""

    kind: str
    detail: str
    stage: str
    began: float = field(default_factory=time.monotonic)
    ready: float | None = None

    def answered(self) -> None:
        if self.ready is None:
            self.ready = time.monotonic()

    def as_record(self) -> result.Start:
        seconds = None if self.ready is None else round(self.ready - self.began, 1)
        return {"kind": self.kind, "detail": self.detail, "stage": self.stage, "seconds": seconds}


_counting: contextvars.ContextVar[tuple[list[Start], str] | None] = contextvars.ContextVar("counting", default=None)


@contextlib.contextmanager
def counting(starts: list[Start], stage: str) -> Iterator[None]:
    """Within this block, every start joins `starts`, marked as `stage`'s."""
    token = _counting.set((starts, stage))
    try:
        yield
    finally:
        _counting.reset(token)


def started(kind: str, detail: str) -> Start:
    """Record a start (record) and, within `counting`, add it to the run's list; the caller marks it answered."""
    record(kind, detail)
    held = _counting.get()
    entry = Start(kind, detail, held[1] if held else "")
    if held:
        held[0].append(entry)
    return entry


def record(kind: str, detail: str) -> None:
    """Append `<unix time> <pid> <kind> <detail>` to $SPECHUB_START_LOG, if it is set."""
    path = settings.current().start_log
    if path is None:
        return
    line = f"{time.time():.0f} {os.getpid()} {kind} {detail}".replace("\n", " ")[:500] + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
