"""A stand-in server on loopback (tests.support.loopback) that answers each method and path as a test scripts it: a
real HTTP server, so the client under test reads a real answer, with its headers, its size and its encoding."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from tests.support.loopback import loopback


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)


def answer(value: object, status: int = 200) -> Answer:
    """`value` as a JSON answer."""
    return Answer(status, json.dumps(value).encode())


@dataclass
class Script:
    """What each (method, path) answers, in turn: the last answer of a list repeats. Unscripted: a 404."""

    routes: dict[tuple[str, str], Answer | list[Answer]]
    seen: list[tuple[str, str]] = field(default_factory=list)

    def next(self, method: str, path: str) -> Answer:
        self.seen.append((method, path))
        found = self.routes.get((method, path), Answer(404, b'{"error": {"code": "not_found", "message": "Not found."}}'))
        if isinstance(found, list):
            return found.pop(0) if len(found) > 1 else found[0]
        return found


class _Scripted(BaseHTTPRequestHandler):
    script: Script

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer("POST")

    def _answer(self, method: str) -> None:
        given = self.script.next(method, urlsplit(self.path).path)
        self.send_response(given.status)
        for name, value in given.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(given.body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that stops reading at its cap
            self.wfile.write(given.body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def scripted(routes: Mapping[tuple[str, str], Answer | list[Answer]]) -> Iterator[tuple[str, Script]]:
    """Serve `routes` while the block runs; yield the base URL and the script (with the requests it saw)."""
    script = Script(dict(routes))
    with loopback(type("Scripted", (_Scripted,), {"script": script})) as base:
        yield base, script
