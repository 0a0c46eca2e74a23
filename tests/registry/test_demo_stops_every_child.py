"""`manage.py demo` stops its children and everything they started, even a child that starts a process on its way
out, as a Celery worker finishing its task may start a vLLM server in a session of its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from registry.management.commands.demo import _stop

pytestmark = pytest.mark.process

# A parent that, told to stop, starts a child in a session of its own (out of its process group), then exits.
PARENT = textwrap.dedent("""
    import signal, subprocess, sys, time
    started = []
    def spawn(*_):
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True))
    def on_term(*_):
        spawn()
        open(sys.argv[1], "a").write("spawned on the way out\\n")
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    spawn()
    open(sys.argv[1], "a").write("ready\\n")
    while True:
        time.sleep(0.05)
""")


def test_a_child_that_starts_a_process_when_told_to_stop_leaves_nothing_running(tmp_path: Path) -> None:
    said = tmp_path / "said"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(said)])
    deadline = time.monotonic() + 30
    while "ready" not in (said.read_text() if said.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    started = psutil.Process(parent.pid).children(recursive=True)
    assert len(started) == 1
    _stop(parent)
    time.sleep(0.5)
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if "time.sleep(120)" in " ".join(p.info["cmdline"] or [])]
    assert leftovers == [], [p.pid for p in leftovers]
    assert not started[0].is_running() or started[0].status() == psutil.STATUS_ZOMBIE
