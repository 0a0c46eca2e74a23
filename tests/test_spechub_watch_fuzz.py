"""`spechub watch` reads any metrics text into a snapshot or says why not, and never raises anything else (issue 42, A).

The texts are vLLM's exposition cut about line by line, expositions written from the names and values watch reads
(and values no count has), and bytes of any kind; the last also come over HTTP, with any Content-Encoding.
"""

from __future__ import annotations

import contextlib
import json
import math
import zlib
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spechub import watch
from tests.support.loopback import loopback
from tests.test_spechub_watch import SPECULATING, reply

FUZZED = settings(deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
LINES = SPECULATING.splitlines()
NAMES = [*watch.COUNTER_FAMILIES, watch.PER_POSITION_FAMILY, watch.REQUESTS_FAMILY, watch.STARTED_FAMILY,
         "vllm:spec_decode_other", "vllm:num_requests_running", "x"]  # fmt: skip
SUFFIXES = ["", "_total", "_created", "_count", "_sum", "_bucket"]
VALUES = ["0", "5", "5.0", "-1", "1e30", "1e400", "NaN", "+Inf", "-Inf", "0x10", "abc", "", "1 1767225600"]


def read(text: str) -> watch.Snapshot | None:
    """The snapshot, None on a WatchError; any other exception fails the test."""
    try:
        shot = watch.snapshot(text, read_at=1.0, engine_version=None, source="fuzzed")
    except watch.WatchError as refused:
        assert str(refused) and "fuzzed" in str(refused)
        return None
    return shot


def check(shot: watch.Snapshot | None) -> None:
    """A snapshot is one SpecHub can take: counts, a bounded k, and JSON without NaN."""
    if shot is None:
        return
    assert all(type(count) is int and count >= 0 for count in (shot.drafts, shot.draft_tokens, shot.accepted, shot.requests))
    assert len(shot.per_position) <= watch.MAX_POSITIONS and all(count >= 0 for count in shot.per_position)
    assert shot.started_at is None or math.isfinite(shot.started_at)
    json.dumps(asdict(shot), allow_nan=False)


def mutated(edits: list[tuple[str, int, str, str]]) -> str:
    """vLLM's exposition with each edit made in turn: (what, at which line, a value, a text). A value or a position
    goes into the at-th sample line, spec-decode ones first; the rest edit the at-th line of any kind."""
    lines = list(LINES)
    for what, at, value, text in edits:
        samples = sorted((i for i, line in enumerate(lines) if not line.startswith("#")),
                         key=lambda i: not lines[i].startswith(watch.SPEC_DECODE_PREFIX))  # fmt: skip
        places = samples if what in ("value", "position") and samples else range(len(lines))
        if not places:
            break
        at = places[at % len(places)]
        line = lines[at]
        edited = {
            "delete": [],
            "value": [line.rsplit(" ", 1)[0] + " " + value],
            "untotal": [line.replace("_total", "", 1)],
            "cut": [line[: len(text) * 3]],
            "insert": [text, line],
            "duplicate": [line, line],
            "position": [line.replace('position="', f'position="{value}{text}', 1)],
            "retype": [line.replace(" counter", f" {text}", 1)],
        }[what]
        lines[at : at + 1] = edited
    return "\n".join(lines) + "\n"


edits = st.lists(
    st.tuples(st.sampled_from(["delete", "value", "untotal", "cut", "insert", "duplicate", "position", "retype"]),
              st.integers(0, 8) | st.integers(0, len(LINES)), st.sampled_from([*VALUES, "9" * 12, "-0"]), st.text(max_size=12)),
    max_size=6,
)  # fmt: skip
counts = st.sampled_from(["0", "5", "7.0", "120"]) | st.sampled_from(VALUES)
labels = st.dictionaries(
    st.sampled_from(["engine", "model_name", "position", "finished_reason"]) | st.sampled_from(["le", "0bad", 'q"uote']),
    st.integers(0, 8).map(str) | st.text(max_size=8) | st.integers(-3, 10**12).map(str),
    max_size=3,
).map(lambda found: "{" + ",".join(f'{name}="{value}"' for name, value in found.items()) + "}" if found else "")
suffixes = st.sampled_from(["_total", ""]) | st.sampled_from(SUFFIXES)
sample = st.builds(lambda name, suffix, labelled, value: f"{name}{suffix}{labelled} {value}",
                   st.sampled_from(NAMES), suffixes, labels, counts)  # fmt: skip
comment = st.builds(lambda kind, name, suffix, said: f"# {kind} {name}{suffix} {said}",
                    st.sampled_from(["TYPE", "HELP", "EOF", "UNIT"]), st.sampled_from(NAMES), st.sampled_from(SUFFIXES),
                    st.sampled_from(["counter", "gauge", "histogram", "summary", "untyped", "unknown", "", "docs"]))  # fmt: skip
written = st.lists(sample | comment, max_size=40)


@given(changes=edits)
@settings(FUZZED, max_examples=400)
def test_vllms_exposition_edited_reads_as_a_snapshot_or_a_watch_error(changes):
    check(read(mutated(changes)))


@given(lines=written)
@FUZZED
def test_expositions_written_from_the_names_watch_reads_read_as_a_snapshot_or_a_watch_error(lines):
    check(read("\n".join(lines) + "\n"))


@given(text=st.text(max_size=300))
@FUZZED
def test_any_text_reads_as_a_snapshot_or_a_watch_error(text):
    check(read(text))


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("saved")


@given(data=st.binary(max_size=300) | st.sampled_from(LINES).map(lambda line: (SPECULATING + line).encode()))
@settings(FUZZED, max_examples=50)
def test_any_saved_file_reads_as_a_snapshot_or_a_watch_error(data, directory):
    (directory / "metrics.txt").write_bytes(data)
    with contextlib.suppress(watch.WatchError):
        check(watch.saved(directory / "metrics.txt"))


class Served(BaseHTTPRequestHandler):
    answer: tuple[bytes, dict[str, str]] = (b"", {})

    def do_GET(self) -> None:
        body, headers = type(self).answer
        reply(self, 200, body, headers)

    def log_message(self, *args: object) -> None:
        pass


def encoded(body: bytes, encoding: str) -> bytes:
    if encoding in ("gzip", "x-gzip"):
        return zlib.compress(body, wbits=16 + zlib.MAX_WBITS)
    return zlib.compress(body) if encoding == "deflate" else body


@given(
    body=st.binary(max_size=200) | st.just(SPECULATING.encode()),
    encoding=st.sampled_from(["", "identity", "gzip", "x-gzip", "deflate", "br", "gzip, gzip", "zstd"]),
    mangled=st.booleans(),
)
@settings(FUZZED, max_examples=40)
def test_any_answer_over_http_reads_as_a_snapshot_or_a_watch_error(body, encoding, mangled, server):
    sent = encoded(body, encoding)
    Served.answer = (sent[: len(sent) // 2] if mangled else sent, {"Content-Encoding": encoding} if encoding else {})
    with contextlib.suppress(watch.WatchError):
        check(watch.scrape(f"{server}/metrics"))


@pytest.fixture(scope="module")
def server() -> Any:
    with loopback(Served) as url:
        yield url
