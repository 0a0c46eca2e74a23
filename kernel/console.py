"""A console a person can read: the engines' logs go to a file, the terminal keeps progress and verdicts."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kernel import settings


def log_file(kind: str, folder: Path | None = None) -> Path:
    """A new log file under `folder` (default var/log/, or $SPECHUB_VAR_DIR/log/), named by kind and time."""
    folder = folder or settings.current().var_dir / "log"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


@dataclass(frozen=True)
class Terminal:
    """Where a person reads: results on `out`, progress and errors on `err`; `log` holds the engines' output."""

    out: TextIO
    err: TextIO
    log: Path | None


@contextlib.contextmanager
def engines_to(log: Path) -> Iterator[Terminal]:
    """Send this process's file descriptors 1 and 2 to `log`, and yield streams to the terminal they were.

    vLLM logs from the engine processes it starts as well as from this one, each to the descriptors
    it inherited: replacing Python's sys.stdout would miss them, so the descriptors themselves move.
    """
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(1), os.dup(2)
    out, err = (os.fdopen(os.dup(descriptor), "w", buffering=1) for descriptor in saved)
    with log.open("ab") as target:
        os.dup2(target.fileno(), 1)
        os.dup2(target.fileno(), 2)
    try:
        yield Terminal(out, err, log)
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for descriptor, stream in zip((1, 2), saved, strict=True):
            os.dup2(stream, descriptor)
            os.close(stream)
        out.close()
        err.close()


@contextlib.contextmanager
def quiet(kind: str, *, verbose: bool) -> Iterator[Terminal]:
    """Engines' output in a new log file of `kind`; with `verbose`, the terminal as it is and no log."""
    if verbose:
        yield Terminal(sys.stdout, sys.stderr, None)
        return
    with engines_to(log_file(kind)) as terminal:
        yield terminal
