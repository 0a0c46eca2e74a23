"""Engine servers die with the worker that started them (real processes: a worker stand-in, `sleep` as the server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kernel import children

WORKER = """
import sys, time
from kernel import children
server = children.spawn(["sleep", "300"], sys.stderr.buffer, {"PATH": "/usr/bin:/bin"})
print(server.pid, flush=True)
time.sleep(300)
"""


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # a zombie waiting for its new parent to reap it runs nothing


def until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture(autouse=True)
def records(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECHUB_VAR_DIR", str(tmp_path))
    return tmp_path / "servers"


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_stand_in_server_dies_within_seconds_of_its_stand_in_worker_being_killed(records):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    worker = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, env=env, text=True)
    assert worker.stdout is not None
    server = int(worker.stdout.readline())
    assert not gone(server) and (records / f"{server}.json").exists()
    worker.kill()  # SIGKILL: no handler, no cleanup code of the worker's own runs
    worker.wait()
    assert until(lambda: gone(server), 5.0), f"server {server} outlived its worker by 5 s"


def test_a_starting_worker_ends_the_stand_in_servers_a_dead_worker_left_and_no_others(records):
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = subprocess.Popen(["sleep", "300"], start_new_session=True)
    mine = subprocess.Popen(["sleep", "300"], start_new_session=True)
    records.mkdir(parents=True)
    (records / f"{left.pid}.json").write_text(json.dumps({"worker": dead.pid, "command": ["sleep"]}))
    (records / f"{mine.pid}.json").write_text(json.dumps({"worker": os.getpid(), "command": ["sleep"]}))
    try:
        assert children.orphans_end() == [left.pid]
        assert left.wait(timeout=5) == -9 and mine.poll() is None  # a live worker's server keeps serving
        assert sorted(p.name for p in records.iterdir()) == [f"{mine.pid}.json"]
    finally:
        mine.kill()
        mine.wait()
