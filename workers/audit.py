"""What a process started, appended to one file: each vLLM engine and server, and each certification.

Set SPECHUB_START_LOG to a file path to keep the record; unset, nothing is written. Operators read what a run
cost from it, and the tests print a summary of theirs. One short line per event, written with O_APPEND, so
processes that share the file never interleave within a line.
"""

from __future__ import annotations

import os
import time

from kernel import settings

KINDS = ("engine", "server", "certification")


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
