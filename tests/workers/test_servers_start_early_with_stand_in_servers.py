"""The throughput stage's servers start after the gate and load while the offline stages measure (issue 24, §3).

Stand-in servers: a few lines of Python's http.server answering /health once they have "loaded" (a second), in
place of vLLM's, so the hand-off and the clean-up are shown in seconds; that the real stage does start its real
servers early is the shared real certification's (`test_certify_end_to_end`: `started_early`).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import httpx
import pytest

from kernel.director import Director
from kernel.errors import UserError
from kernel.spec import ModelRef, RunSpec
from workers import serving, speed
from workers.engines.base import Completion, Engine, EngineConfig, Sampling, SpecCounters
from workers.stages import MeasuringStage, _Shared
from workers.workbench import Workbench

pytestmark = pytest.mark.process

STAND_IN = """
import http.server, sys, time
time.sleep(1.0)  # loading
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


class StandInServers(Engine):
    """An engine whose only part here is its server: the stand-in above."""

    name = "stand-in"

    def start(self, config: EngineConfig) -> None: ...

    def generate(self, prompts: list[list[int]], sampling: Sampling) -> list[Completion]:
        return []

    def counters(self) -> SpecCounters:
        return SpecCounters()

    def manifest(self) -> dict[str, object]:
        return {}

    def stop(self) -> None: ...

    def server_command(self, config: EngineConfig, port: int) -> list[str]:
        return [sys.executable, "-c", STAND_IN, str(port)]


CONFIGS = {"baseline": EngineConfig(verifier="toy"), "speculative": EngineConfig(verifier="toy", speculative_config={})}


SPEC = RunSpec(1, 1, ModelRef("toy/verifier", "a" * 40), ModelRef("toy/draft", "b" * 40), "draft_model", 4, "vllm", "cpu")


def stage(name: str, work: Any, shared: _Shared, spec: RunSpec = SPEC) -> Any:
    document: Any = {"stages": {}}
    return MeasuringStage(name, work, shared).run(spec, document, lambda percent: None)


def test_servers_started_early_are_waited_for_not_started_again(monkeypatch):
    spawned = serving.spawn(StandInServers(), CONFIGS)
    monkeypatch.setattr(serving, "_start", lambda *args: pytest.fail("a server was started again"))
    with serving.servers(StandInServers(), CONFIGS, spawned) as running:
        assert running is spawned.started
        assert all(httpx.get(f"{server.url}/health").status_code == 200 for server in running.values())
    assert all(server.process.poll() is not None for server in spawned.started.values())  # stopped on the way out


def early_gate(bench: Workbench, report: Any) -> dict[str, Any]:
    assert bench.serves, "the shared workbench knows the throughput stage will run"
    bench.early = serving.spawn(StandInServers(), CONFIGS)
    return {}


def test_a_run_that_fails_after_the_gate_stops_the_servers_started_for_the_throughput_stage():
    shared = _Shared(serves=True)

    def baseline(bench: Workbench, report: Any) -> dict[str, Any]:
        assert bench.early is not None and all(s.process.poll() is None for s in bench.early.started.values())
        started.extend(bench.early.started.values())
        raise UserError("engine:refused-pair", "the offline engine refused the pair")

    started: list[serving.Server] = []
    director = Director([MeasuringStage("gate", early_gate, shared), MeasuringStage("baseline", baseline, shared)])
    with pytest.raises(UserError):
        director.run(SPEC, lambda stage, percent: None)
    assert shared.bench is not None and shared.bench.early is None and len(started) == 2
    assert all(server.process.poll() is not None for server in started)


def test_a_run_that_ends_without_the_stage_that_would_take_them_stops_them_too():
    shared = _Shared(serves=True)
    started: list[serving.Server] = []

    def verdict(bench: Workbench, report: Any) -> dict[str, Any]:
        assert bench.early is not None
        started.extend(bench.early.started.values())
        return {"verdict": "provisional"}

    Director([MeasuringStage("gate", early_gate, shared), MeasuringStage("verdict", verdict, shared)]).run(
        SPEC, lambda stage, percent: None
    )
    assert len(started) == 2 and all(server.process.poll() is not None for server in started)


def test_another_attempt_stops_what_the_last_one_started():
    shared = _Shared(serves=True)

    def gate(bench: Workbench, report: Any) -> dict[str, Any]:
        bench.early = serving.spawn(StandInServers(), CONFIGS)
        return {}

    stage("gate", gate, shared)
    assert shared.bench is not None and shared.bench.early is not None
    started = list(shared.bench.early.started.values())
    stage("fetch", lambda bench, report: {}, shared, dataclasses.replace(SPEC, attempt=2))
    assert all(server.process.wait(timeout=30) is not None for server in started)


def test_without_a_throughput_stage_nothing_starts_early():
    shared = _Shared(serves=False)

    def gate(bench: Workbench, report: Any) -> dict[str, Any]:
        speed.start_early(bench)
        return {}

    stage("gate", gate, shared)
    assert shared.bench is not None and shared.bench.early is None
