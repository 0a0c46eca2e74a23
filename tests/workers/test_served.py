"""The engine contract over a published server (workers/served.py): what an answer's counters mean, and whose fault a
server that does not come up is. The real server path is the shared certification's (tests/workers/test_serving_real.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernel.errors import InfraError, UserError
from workers import serving
from workers.engines.base import EngineConfig, SpecCounters
from workers.served import ServedEngine, request_counters


def test_an_answers_histogram_gives_the_counters_vllm_counts():
    # k = 3: one step accepted nothing, two accepted two tokens, one all three.
    found = request_counters({"acceptance_histogram": [1, 0, 2, 1], "num_draft_tokens": 12})
    assert found == SpecCounters(drafts=4, draft_tokens=12, accepted=7, per_position=(3, 3, 1))
    assert request_counters(None) is None and request_counters({"acceptance_histogram": []}) is None


def exited_server(tmp_path: Path, code: str) -> serving.Server:
    """A stand-in server: a process that prints what vLLM would on its way out, then exits."""
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
    process.wait(timeout=30)
    return serving.Server(name="speculative", command=[], port=1, process=process, log=log)


PAIR = EngineConfig(verifier="toy", speculative_config={"method": "draft_model"})


def test_a_pair_server_that_vllm_refuses_is_the_pairs_fault_stand_in(tmp_path):
    server = exited_server(tmp_path, "import sys; print('ValueError: the draft and verifier vocabularies differ'); sys.exit(1)")
    with pytest.raises(UserError) as refused:
        ServedEngine(server, "toy", {}).start(PAIR)
    assert refused.value.code == "engine:refused-pair" and "vocabularies differ" in refused.value.message


def test_a_server_killed_or_failing_otherwise_is_the_infrastructures_stand_in(tmp_path):
    killed = exited_server(tmp_path, "import os, signal; print('ValueError: late'); os.kill(os.getpid(), signal.SIGKILL)")
    with pytest.raises(InfraError) as lost:
        ServedEngine(killed, "toy", {}).start(PAIR)
    assert lost.value.code == "serve:start-failed"
    crashed = exited_server(tmp_path, "import sys; print('RuntimeError: no memory for the KV cache'); sys.exit(1)")
    with pytest.raises(InfraError):
        ServedEngine(crashed, "toy", {}).start(PAIR)
