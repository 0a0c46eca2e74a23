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


@pytest.mark.parametrize("three_fit", [True, False], ids=["cpu", "one-gpu"])
def test_a_best_k_other_than_the_runs_is_measured_on_its_own_stand_in_server_beside_the_same_baseline(
    monkeypatch, tmp_path, three_fit
):
    """Which k (issue 26 §1): where a level's best k is not the run's, one more speculative server drafting that k
    starts, that level is timed against the running baseline, and it gets a recipe; the server stops after. Where
    three servers do not fit (one GPU), the run's own speculative server, measured already, stops first."""
    from kernel import result
    from workers import choice_of_k

    plan = dataclasses.replace(SPEC.plan, concurrency=(1, 4))
    bench = Workbench(spec=dataclasses.replace(SPEC, plan=plan), suite=None)  # type: ignore[arg-type]
    bench.paths = {"verifier": tmp_path}
    bench.engine_config = {"method": "draft_model", "model": "/snap", "num_speculative_tokens": 4}
    bench.prompts, bench.categories = [[1, 2, 3]] * 8, ["chat"] * 8
    # A costly draft: AL 1.9 at k = 1 and 4.0 at 4, measured 1.0x at c = 1 (best k 1) and 3.9x at c = 4 (best 4).
    per_position = [90, 80, 70, 60]
    counters = {"drafts": 100, "draft_tokens": 400, "accepted": sum(per_position), "per_position": per_position}
    offline: Any = {"start_seconds": 0.0, "greedy": {}, "counters": {"chat": counters}, "samples": {}, "manifest": {}}
    bench.baseline, bench.speculative = offline, offline

    def level(speedup: float) -> result.Level:
        return {"speedup": speedup, "speedup_interval": [speedup * 0.9, speedup * 1.1], "baseline": {"tokens_per_second": 100.0},
                "speculative": {"tokens_per_second": 100.0 * speedup}, "block_ratios": [speedup] * 3}  # type: ignore[typeddict-item]  # fmt: skip

    timed: list[tuple[str, int]] = []

    def fake_level(bench: Workbench, pair: Any, model: str, concurrency: int) -> tuple[result.Level, dict[str, Any]]:
        assert pair["baseline"] is baseline and pair["speculative"].process.poll() is None  # the stand-in answers
        timed.append((pair["speculative"].name, concurrency))
        return level(1.15), {}

    monkeypatch.setattr(StandInServers, "serves_beside_offline", lambda self: three_fit, raising=False)
    monkeypatch.setattr(speed, "load_engine", lambda name: StandInServers)
    monkeypatch.setattr(speed, "_level", fake_level)
    monkeypatch.setattr(choice_of_k, "prefill", lambda *args: {"tokens": [8.0, 128.0], "seconds": [0.02, 0.02]})
    monkeypatch.setattr(speed, "recipe", lambda bench, k: f"vllm serve toy --num-speculative-tokens {k}")
    # The schedule composed from these levels is served by its own step (tests/workers/test_served_schedule_real.py):
    # here, which ranges it is handed.
    scheduled: list[Any] = []

    def schedule(bench: Workbench, running: Any, model: str, levels: Any, ranges: Any) -> dict[str, Any]:
        scheduled.append(ranges)
        return {}

    monkeypatch.setattr(speed, "_schedule", schedule)
    with serving.servers(StandInServers(), CONFIGS) as running:
        baseline = running["baseline"]
        choice = speed.which_k(bench, running, "toy", {"1": level(1.0), "4": level(3.9)})
        assert (running["speculative"].process.poll() is None) == three_fit
    assert choice is not None and choice["verifier_seconds_per_token"] == 0.0
    assert {level: best["best_k"] for level, best in choice["levels"].items()} == {"1": 1, "4": 4}
    assert timed == [("speculative-k1", 1)]  # only the level whose best is not 4
    assert choice["levels"]["1"]["measured"]["speedup"] == 1.15 and "measured" not in choice["levels"]["4"]
    assert set(choice["recipes"]) == {"4", "1"}
    assert scheduled == [[(1, 3, 1), (4, 1024, 4)]] and "schedule" in choice  # k = 1 measured best at c=1, 4 at c=4
