"""Server processes that do not outlive the worker that started them.

The throughput stage starts two vLLM servers, each in a session of its own so that stopping one
stops its engine process too. Stopped by the stage's own code, they end; but a worker killed
outright (SIGKILL, the OOM killer, a hard time limit's os._exit) used to leave both serving with
PPID 1, each holding its share of memory (a GPU's, on a GPU node), so the node's next run could not
start. Two things now end them:

- the parent-death signal (Linux prctl PR_SET_PDEATHSIG): the kernel sends the server SIGTERM when
  the worker dies, and vLLM's server stops its engine on SIGTERM;
- a record per server (its process group and the worker's pid) in SPECHUB_VAR_DIR/servers: a worker
  starting ends the groups whose worker is gone, for the case the signal missed (the server was
  killed with its engine left, or another OS).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from kernel import settings

PR_SET_PDEATHSIG = 1
# Looked up once, here: between fork and exec the child should call, not load a library (other threads may hold locks).
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def records_dir() -> Path:
    return settings.current().var_dir / "servers"


def spawn(command: list[str], out: IO[bytes], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start `command` in its own session, tied to this process's life, and record its group."""
    parent = os.getpid()
    process = subprocess.Popen(
        command, stdout=out, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True,
        preexec_fn=lambda: _die_with(parent),
    )  # fmt: skip
    records_dir().mkdir(parents=True, exist_ok=True)
    (records_dir() / f"{process.pid}.json").write_text(json.dumps({"worker": parent, "command": command[:3]}))
    return process


def forget(pid: int) -> None:
    """The server `pid` was stopped by its own worker: drop its record."""
    (records_dir() / f"{pid}.json").unlink(missing_ok=True)


def _die_with(parent: int) -> None:
    """In the child, before exec: ask the kernel for SIGTERM when the parent dies (and check it has not already)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def orphans_end() -> list[int]:
    """End the server groups whose worker is gone; return their pids. Live workers' servers are left alone."""
    ended = []
    for record in sorted(records_dir().glob("*.json")) if records_dir().is_dir() else []:
        pid = int(record.stem)
        with contextlib.suppress(OSError, ValueError, KeyError):  # a record that cannot be read is dropped
            if _alive(int(json.loads(record.read_text())["worker"])):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
                ended.append(pid)
        record.unlink(missing_ok=True)
    return ended


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, and another user's
    return True
