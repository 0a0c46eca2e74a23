"""`spechub watch` reads a vLLM server's spec-decode counters and pushes them to SpecHub (issue 27, §2).

Both ends are real HTTP servers on loopback: a stand-in vLLM 0.32 API server answering /metrics with an exposition
written from vllm/v1/metrics/loggers.py and vllm/v1/spec_decode/metrics.py (two engines, `_total` and `_created`
samples, per-position acceptance, request_success by finished_reason, process_start_time_seconds) and /version;
and a stand-in for SpecHub's observations endpoint that records each push and answers what the test queued.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from spechub import cli, watch
from tests.support.loopback import loopback
from tests.support.processes import ROOT, process_env

INGEST_TOKEN = "ingest-secret-7f3a"
API_TOKEN = "api-secret-91bc"
CREATED = "1.7672256e+09"


def counter(name: str, doc: str, samples: list[tuple[str, float]]) -> str:
    """A counter as prometheus_client's text format writes it: `_total`, then `_created` as its own gauge."""
    lines = [f"# HELP {name}_total {doc}", f"# TYPE {name}_total counter"]
    lines += [f"{name}_total{{{labels}}} {value!r}" for labels, value in samples]
    lines += [f"# HELP {name}_created {doc}", f"# TYPE {name}_created gauge"]
    lines += [f"{name}_created{{{labels}}} {CREATED}" for labels, _ in samples]
    return "\n".join(lines) + "\n"


def engine(index: int) -> str:
    return f'engine="{index}",model_name="org/verifier"'


EXPOSITION_COMMON = (
    "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
    "# TYPE process_start_time_seconds gauge\n"
    "process_start_time_seconds 1.76722560025e+09\n"
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    f"vllm:num_requests_running{{{engine(0)}}} 3.0\n"
    f"vllm:num_requests_running{{{engine(1)}}} 1.0\n"
    + counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(engine(0), 5120.0), (engine(1), 1024.0)])
    + counter("vllm:request_success", "Count of successfully processed requests.",
              [(f'{engine(0)},finished_reason="{reason}"', count)
               for reason, count in (("stop", 40.0), ("length", 8.0), ("abort", 1.0), ("error", 0.0), ("repetition", 0.0))]
              + [(f'{engine(1)},finished_reason="{reason}"', count)
                 for reason, count in (("stop", 10.0), ("length", 1.0), ("abort", 0.0), ("error", 0.0), ("repetition", 0.0))])
    + "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n"
    "# TYPE vllm:time_to_first_token_seconds histogram\n"
    f'vllm:time_to_first_token_seconds_bucket{{{engine(0)},le="0.1"}} 45.0\n'
    f'vllm:time_to_first_token_seconds_bucket{{{engine(0)},le="+Inf"}} 49.0\n'
    f"vllm:time_to_first_token_seconds_count{{{engine(0)}}} 49.0\n"
    f"vllm:time_to_first_token_seconds_sum{{{engine(0)}}} 3.5\n"
)  # fmt: skip
SPEC_DECODE = (
    counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", [(engine(0), 100.0), (engine(1), 20.0)])
    + counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", [(engine(0), 300.0), (engine(1), 60.0)])
    + counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", [(engine(0), 150.0), (engine(1), 30.0)])
    # Positions out of order on purpose: per_position must follow the label, not the text.
    + counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
              [(f'{engine(0)},position="2"', 30.0), (f'{engine(0)},position="0"', 70.0), (f'{engine(0)},position="1"', 50.0),
               (f'{engine(1)},position="0"', 14.0), (f'{engine(1)},position="1"', 10.0), (f'{engine(1)},position="2"', 6.0)])
)  # fmt: skip
SPECULATING = EXPOSITION_COMMON + SPEC_DECODE
NOT_SPECULATING = EXPOSITION_COMMON

EXPECTED = {"drafts": 120, "draft_tokens": 360, "accepted": 180, "per_position": [84, 60, 36], "k": 3, "requests": 60,
            "started_at": 1767225600.25}  # fmt: skip


Answer = tuple[int, dict[str, Any], dict[str, str]]  # SpecHub's stand-in's reply: status, JSON body, headers
STORED: Answer = (201, {"stored": 1, "state": "collecting", "reason": "one more snapshot makes a window"}, {})


@dataclass
class StandIns:
    """The two servers' state: what the vLLM stand-in serves, what SpecHub's stand-in answers and what it received."""

    metrics: str = SPECULATING
    redirect: str | None = None
    answers: list[Answer] = field(default_factory=list)
    pushes: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)


def handler(state: StandIns, routes: Any) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            routes.get(self, state)

        def do_POST(self) -> None:
            routes.post(self, state)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def reply(request: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    request.send_response(status)
    for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
        request.send_header(name, value)
    request.end_headers()
    request.wfile.write(body)


class VLLM:
    @staticmethod
    def get(request: BaseHTTPRequestHandler, state: StandIns) -> None:
        if request.path == "/metrics" and state.redirect:
            reply(request, 302, b"", {"Location": state.redirect})
        elif request.path.startswith("/metrics"):
            reply(request, 200, state.metrics.encode(), {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})
        elif request.path == "/version":
            reply(request, 200, b'{"version": "0.32.0"}', {"Content-Type": "application/json"})
        else:
            reply(request, 404, b'{"detail": "Not Found"}')

    @staticmethod
    def post(request: BaseHTTPRequestHandler, state: StandIns) -> None:
        reply(request, 405, b"")


class SpecHub:
    @staticmethod
    def get(request: BaseHTTPRequestHandler, state: StandIns) -> None:
        reply(request, 404, b"")

    @staticmethod
    def post(request: BaseHTTPRequestHandler, state: StandIns) -> None:
        body = json.loads(request.rfile.read(int(request.headers["Content-Length"])))
        state.pushes.append((request.path, request.headers.get("Authorization"), body))
        status, answer, headers = state.answers.pop(0) if state.answers else STORED
        reply(request, status, json.dumps(answer).encode(), {"Content-Type": "application/json", **headers})


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[StandIns, str, str]]:
    """(state, vLLM's base URL, SpecHub's base URL); the client configured for SpecHub with an API token it must keep."""
    state = StandIns()
    with ExitStack() as stack:
        vllm = stack.enter_context(loopback(handler(state, VLLM)))
        spechub = stack.enter_context(loopback(handler(state, SpecHub)))
        monkeypatch.setenv("SPECHUB_CONFIG", str(tmp_path / "none.toml"))
        monkeypatch.setenv("SPECHUB_URL", spechub)
        monkeypatch.setenv("SPECHUB_TOKEN", API_TOKEN)
        monkeypatch.delenv("SPECHUB_INGEST_TOKEN", raising=False)
        yield state, vllm, spechub


def watching(vllm: str, *extra: str) -> int:
    return cli.main(["watch", "--deployment", "7", "--metrics", f"{vllm}/metrics", "--every", "0.01", "--token", INGEST_TOKEN,
                     *extra])  # fmt: skip


def error(status: int, code: str, message: str, **headers: str) -> Answer:
    return status, {"error": {"code": code, "message": message, "details": {}}}, headers


def test_watch_pushes_the_counters_as_read_with_the_bearer_ingest_token_to_a_stand_in_spechub(servers, capsys):
    state, vllm, _ = servers
    before = time.time()
    assert watching(vllm, "--count", "2") == 0
    out, err = capsys.readouterr()
    pushed = [("/api/v1/deployments/7/observations/", f"Bearer {INGEST_TOKEN}")] * 2
    assert [(path, auth) for path, auth, _ in state.pushes] == pushed  # never the API token: only the ingest one
    first, second = (body["snapshots"] for _, _, body in state.pushes)
    assert len(first) == len(second) == 1
    shot = first[0]
    assert {key: shot[key] for key in EXPECTED} == EXPECTED
    assert all(type(shot[key]) is int for key in ("drafts", "draft_tokens", "accepted", "requests", "k"))
    assert all(type(value) is int for value in shot["per_position"])
    assert shot["engine_version"] == "0.32.0"
    assert before <= shot["read_at"] <= second[0]["read_at"] <= time.time()
    assert set(shot) == {*EXPECTED, "read_at", "engine_version"}  # the contract's fields, nothing else
    assert out.count("120 drafts, 180/360 draft tokens accepted, 60 requests → collecting: one more snapshot makes a window") == 2
    assert INGEST_TOKEN not in out + err and API_TOKEN not in out + err


def test_once_pushes_a_saved_exposition_as_of_its_modification_time_to_a_stand_in_spechub(servers, tmp_path, monkeypatch, capsys):
    state, _, _ = servers
    saved = tmp_path / "metrics.txt"
    saved.write_text(SPECULATING)
    os.utime(saved, (1767300000.5, 1767300000.5))
    monkeypatch.setenv("SPECHUB_INGEST_TOKEN", INGEST_TOKEN)
    assert cli.main(["watch", "--deployment", "7", "--once", str(saved)]) == 0
    [(_, auth, body)] = state.pushes
    assert auth == f"Bearer {INGEST_TOKEN}"
    assert body["snapshots"] == [{**EXPECTED, "read_at": 1767300000.5, "engine_version": None}]
    assert "2026-01-01T20:40:00+00:00  deployment 7: 120 drafts" in capsys.readouterr().out


def test_a_revoked_ingest_token_ends_the_watch_with_spechubs_message_from_a_stand_in_spechub(servers, capsys):
    state, vllm, _ = servers
    state.answers = [error(401, "ingest_token_revoked", "This deployment's ingest token was revoked.")]
    assert watching(vllm, "--count", "5") == 1
    assert len(state.pushes) == 1
    assert "spechub: ingest_token_revoked: This deployment's ingest token was revoked." in capsys.readouterr().err


def test_refused_rate_limited_and_failed_pushes_are_reported_and_the_watch_goes_on_with_a_stand_in_spechub(servers, capsys):
    state, vllm, _ = servers
    state.answers = [error(400, "snapshot_invalid", "accepted exceeds draft_tokens"),
                     error(429, "throttled", "Too many pushes.", **{"Retry-After": "0"}),
                     error(503, "unavailable", "Down for maintenance.")]  # fmt: skip
    assert watching(vllm, "--count", "4") == 0
    out, err = capsys.readouterr()
    assert len(state.pushes) == 4
    assert "snapshot_invalid: accepted exceeds draft_tokens (HTTP 400)" in err
    assert "throttled: Too many pushes. (HTTP 429)" in err and "unavailable: Down for maintenance. (HTTP 503)" in err
    assert out.count("→ collecting") == 1  # the fourth push was stored


def test_an_unreachable_spechub_is_reported_and_the_watch_goes_on(servers, monkeypatch, capsys):
    _, vllm, _ = servers
    with loopback(BaseHTTPRequestHandler) as gone:
        pass  # a port that nothing listens on any more
    monkeypatch.setenv("SPECHUB_URL", gone)
    assert watching(vllm, "--count", "2") == 0
    assert capsys.readouterr().err.count("client:unreachable") == 2


def test_a_server_without_speculative_decoding_is_named_in_the_loop_and_with_once(servers, tmp_path, capsys):
    state, vllm, _ = servers
    state.metrics = NOT_SPECULATING
    assert watching(vllm, "--count", "1") == 0
    said = f"speculative decoding is not on for this server (no vllm:spec_decode_* counters at {vllm}/metrics)"
    assert said in capsys.readouterr().err
    (tmp_path / "metrics.txt").write_text(NOT_SPECULATING)
    assert cli.main(["watch", "--deployment", "7", "--once", str(tmp_path / "metrics.txt"), "--token", INGEST_TOKEN]) == 1
    assert f"no vllm:spec_decode_* counters at {tmp_path / 'metrics.txt'})" in capsys.readouterr().err
    assert state.pushes == []


def test_the_scrape_follows_no_redirect_to_another_server_and_reads_no_more_than_the_cap(servers, monkeypatch, capsys):
    state, vllm, _ = servers
    state.redirect = vllm.replace("127.0.0.1", "localhost") + "/metrics"  # the same port, another host name
    assert watching(vllm, "--count", "1") == 0
    assert f"redirects to another server ({state.redirect})" in capsys.readouterr().err
    assert state.pushes == []
    state.redirect = "/metrics?again"  # the same server: followed
    assert watching(vllm, "--count", "1") == 0
    assert len(state.pushes) == 1
    state.redirect = None
    monkeypatch.setattr(watch, "MAX_BYTES", 1024)
    assert watching(vllm, "--count", "1") == 0
    assert "answered more than" in capsys.readouterr().err
    assert len(state.pushes) == 1


def test_the_ingest_token_is_required(servers, capsys):
    _, vllm, _ = servers
    assert cli.main(["watch", "--deployment", "7", "--metrics", f"{vllm}/metrics"]) == 1
    assert "ingest token: --token or SPECHUB_INGEST_TOKEN" in capsys.readouterr().err


@pytest.mark.process
def test_sigterm_ends_the_watch_cleanly_with_a_stand_in_spechub(servers, tmp_path):
    state, vllm, spechub = servers
    env = process_env({"SPECHUB_CONFIG": str(tmp_path / "none.toml"), "SPECHUB_URL": spechub,
                       "SPECHUB_INGEST_TOKEN": INGEST_TOKEN})  # fmt: skip
    command = [sys.executable, "-m", "spechub.cli", "watch", "--deployment", "7", "--metrics", f"{vllm}/metrics"]
    watcher = subprocess.Popen(
        [*command, "--every", "0.2"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not state.pushes and time.monotonic() < deadline:
            time.sleep(0.05)
        watcher.send_signal(signal.SIGTERM)
        out, err = watcher.communicate(timeout=30)
    finally:
        watcher.kill()
    assert state.pushes and watcher.returncode == 0, (out, err)
    assert "spechub: watch stopped" in err and "→ collecting" in out
