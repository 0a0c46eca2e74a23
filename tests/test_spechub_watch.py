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
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from spechub import cli, watch
from spechub.client import Client, SpecHubError
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


Answer = tuple[int, dict[str, Any] | str, dict[str, str]]  # SpecHub's stand-in's reply: status, JSON body (or text), headers
STORED: Answer = (201, {"stored": 1, "skipped": 0, "state": "collecting", "reason": "one more snapshot makes a window",
                        "live_al": None}, {})  # fmt: skip


@dataclass
class StandIns:
    """The two servers' state: what the vLLM stand-in serves, what SpecHub's stand-in answers and what it received."""

    metrics: str = SPECULATING
    redirect: str | None = None
    gzipped: bytes | None = None  # served as /metrics with Content-Encoding: gzip
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
        if request.path == "/metrics" and state.gzipped is not None:
            reply(request, 200, state.gzipped, {"Content-Type": "text/plain", "Content-Encoding": "gzip"})
        elif request.path == "/metrics" and state.redirect:
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
        if isinstance(answer, str):  # not SpecHub's JSON: a proxy's page, a redirect's note
            reply(request, status, answer.encode(), {"Content-Type": "text/html", **headers})
        else:
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


def test_a_redirect_from_spechub_ends_the_watch_naming_where_it_points_and_a_page_that_is_not_json_is_reported(servers, capsys):
    state, vllm, spechub = servers
    https = spechub.replace("http://", "https://") + "/api/v1/deployments/7/observations/"
    state.answers = [(200, "<html>Welcome to nginx!</html>", {}), (307, "", {"Location": https})]
    assert watching(vllm, "--count", "5") == cli.INVALID
    err = capsys.readouterr().err
    assert len(state.pushes) == 2 and "Traceback" not in err
    assert f"client:not-json: {spechub} answered HTTP 200 with text/html, not SpecHub's JSON" in err
    said = f"redirecting to {https} (the server wants https): use {spechub.replace('http://', 'https://')} as the server URL"
    assert f"client:redirected: {spechub} answered HTTP 307, {said}" in err


@pytest.mark.parametrize("every", ["nan", "inf", "-inf", "0", "-1", "1e300"])
def test_every_must_be_a_finite_positive_number_of_seconds(servers, every, capsys):
    state, vllm, _ = servers
    assert cli.main(["watch", "--deployment", "7", "--metrics", f"{vllm}/metrics", f"--every={every}", "--token", "t"]) == 1
    assert f"--every must be a number of seconds above 0 and at most 86400 (a day), not {float(every)}" in capsys.readouterr().err
    assert state.pushes == []


@pytest.mark.parametrize("count", ["0", "-3"])
def test_count_must_be_one_or_more(servers, count, capsys):
    state, vllm, _ = servers
    assert watching(vllm, "--count", count) == 1
    assert f"--count must be 1 or more, not {count}" in capsys.readouterr().err and state.pushes == []


@pytest.mark.parametrize("url", ["http://[::1/metrics", "http://127.0.0.1:99999/metrics", "ftp://127.0.0.1/metrics", "metrics"])
def test_a_metrics_url_that_is_no_url_is_refused(servers, url, capsys):
    assert cli.main(["watch", "--deployment", "7", "--metrics", url, "--token", INGEST_TOKEN]) == 1
    assert "is not a metrics URL" in capsys.readouterr().err


def test_once_counts_the_bytes_it_reads_so_a_device_is_refused_at_the_cap(servers, capsys):
    state, _, _ = servers
    assert cli.main(["watch", "--deployment", "7", "--once", "/dev/zero", "--token", INGEST_TOKEN]) == 1
    assert "/dev/zero is more than 8 MiB; that is not a vLLM /metrics" in capsys.readouterr().err
    assert state.pushes == []


def test_once_reads_a_pipe_as_of_the_reading(servers, tmp_path):
    state, _, _ = servers
    pipe = tmp_path / "metrics.pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=pipe.write_text, args=(SPECULATING,), daemon=True)
    writer.start()
    before = time.time()
    assert cli.main(["watch", "--deployment", "7", "--once", str(pipe), "--token", INGEST_TOKEN]) == 0
    writer.join(timeout=10)
    [(_, _, body)] = state.pushes
    assert before <= body["snapshots"][0]["read_at"] <= time.time() and body["snapshots"][0]["drafts"] == EXPECTED["drafts"]


def gzip_bomb(size: int = 200 * 2**20) -> bytes:
    """`size` bytes of zeros, gzipped: under 1 MiB on the wire."""
    packer, block = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS), bytes(2**20)
    return b"".join([*(packer.compress(block) for _ in range(size // len(block))), packer.flush()])


def test_a_gzip_bomb_is_refused_at_the_cap_without_inflating_it_in_memory(servers, capsys):
    state, vllm, _ = servers
    state.gzipped = gzip_bomb()
    tracemalloc.start()
    try:
        with pytest.raises(watch.WatchError, match="answered more than 8 MiB"):
            watch.fetch(f"{vllm}/metrics")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MiB"  # the cap and a chunk; httpx's own decoding reached 143 MiB
    assert watching(vllm, "--count", "1") == 0
    assert "answered more than 8 MiB" in capsys.readouterr().err and state.pushes == []


def test_a_gzipped_exposition_is_read(servers):
    state, vllm, _ = servers
    state.gzipped = zlib.compress(SPECULATING.encode(), wbits=16 + zlib.MAX_WBITS)
    assert watching(vllm, "--count", "1") == 0
    [(_, _, body)] = state.pushes
    assert {key: body["snapshots"][0][key] for key in EXPECTED} == EXPECTED


def openmetrics_style(text: str) -> str:
    """The TYPE and HELP lines name the counter family without `_total`, as OpenMetrics does; samples keep it."""
    return "\n".join(
        line.replace("_total ", " ", 1) if line.startswith(("# TYPE", "# HELP")) else line for line in text.splitlines()
    )


@pytest.mark.parametrize("style", [openmetrics_style, lambda text: "\n".join(
    line for line in text.splitlines() if not line.startswith("#"))], ids=["openmetrics", "untyped"])  # fmt: skip
def test_counters_named_openmetrics_style_or_untyped_are_read(style):
    text = style(SPECULATING)
    assert "# TYPE vllm:spec_decode_num_drafts_total" not in text
    shot = watch.snapshot(text, read_at=1.0, engine_version=None, source="text")
    assert {key: getattr(shot, key) for key in EXPECTED} == EXPECTED


def test_spec_decode_lines_it_cannot_read_are_named_instead_of_pushed_as_zero(servers, tmp_path, capsys):
    state, _, _ = servers
    unreadable = EXPOSITION_COMMON + "".join(
        f"# TYPE vllm:spec_decode_num_{name} gauge\nvllm:spec_decode_num_{name}{{{engine(0)}}} 5.0\n"  # a gauge: no count
        for name in ("drafts", "draft_tokens", "accepted_tokens")
    )
    (tmp_path / "metrics.txt").write_text(unreadable)
    assert cli.main(["watch", "--deployment", "7", "--once", str(tmp_path / "metrics.txt"), "--token", INGEST_TOKEN]) == 1
    err = capsys.readouterr().err
    assert "has vllm:spec_decode_* metrics but no counter watch can read" in err
    assert f"'vllm:spec_decode_num_drafts{{{engine(0)}}} 5.0'" in err and err.count("vllm:spec_decode_num_") == 4
    assert state.pushes == []


@pytest.mark.parametrize(
    ("line", "said"),
    [(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{10**9}"}} 1.0', "not one of 0 to 63"),
     ('vllm:spec_decode_num_accepted_tokens_per_pos_total{position="x"} 1.0', "has position 'x'"),
     ("vllm:spec_decode_num_drafts_total Inf", "is inf, not a count"),
     ("vllm:spec_decode_num_drafts_total NaN", "is nan, not a count"),
     ("vllm:spec_decode_num_drafts_total -1", "is -1, not a count")],
)  # fmt: skip
def test_a_count_that_is_no_count_is_refused(line, said):
    with pytest.raises(watch.WatchError, match=said):
        watch.snapshot(SPECULATING + line + "\n", read_at=1.0, engine_version=None, source="text")


class Redirecting(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))  # a body left unread may reset the connection
        reply(self, 307, b"", {"Location": "https://spechub.example" + self.path})

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


class NotJSON(Redirecting):
    def do_GET(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        reply(self, 200, b"<html>It works!</html>", {"Content-Type": "text/html"})

    do_POST = do_GET


class OtherShape(Redirecting):
    def do_GET(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        reply(self, 200, b'"a JSON string"', {"Content-Type": "application/json"})

    do_POST = do_GET


def every_client_call(client: Client, tmp_path: Path) -> Iterator[Any]:
    (tmp_path / "traffic.jsonl").write_text('{"prompt": "hi"}\n')
    calls = [lambda: client.compatibility(verifier="v"), lambda: client.submit(draft="d"), lambda: client.run(1), client.runs,
             lambda: client.pair(1), lambda: client.recommend(verifier="v"),
             lambda: client.workload_upload(tmp_path / "traffic.jsonl", verifier="v"), lambda: client.workload_certify(1),
             lambda: client.workload_report(1), client.public_key, lambda: client.certificate_file(1),
             lambda: client.push_observations(7, [], ingest_token=INGEST_TOKEN), lambda: client.wait(1)]  # fmt: skip
    for call in calls:
        try:
            yield call()
        except SpecHubError as error:
            yield error


@pytest.mark.parametrize(
    ("handler", "code"),
    [(Redirecting, "client:redirected"), (NotJSON, "client:not-json"), (OtherShape, "client:unexpected-answer")],
)
def test_every_client_call_turns_an_answer_that_is_not_spechubs_json_into_a_spechub_error(handler, code, tmp_path):
    with loopback(handler) as server:
        answers = list(every_client_call(Client(server, "api-token"), tmp_path))
    binary = handler is not Redirecting  # the certificate file is bytes, not JSON: any 2xx is its content
    assert [type(a) for a in answers] == [SpecHubError] * 10 + [bytes if binary else SpecHubError] + [SpecHubError] * 2
    assert {a.code for a in answers if isinstance(a, SpecHubError)} == {code}
    if handler is Redirecting:
        said = "redirecting to https://spechub.example/api/v1/runs/1/ (the server wants https): use https://spechub.example as"
        assert said in str(answers[2])


def test_verify_through_a_redirecting_server_says_where_it_points(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECHUB_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "certificate.json").write_text("{}")
    with loopback(Redirecting) as server:
        assert cli.main(["verify", str(tmp_path / "certificate.json"), "--url", server]) == cli.INVALID
    said = capsys.readouterr().err
    assert "client:redirected" in said and "https://spechub.example/api/v1/certificates/public-key/" in said


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
