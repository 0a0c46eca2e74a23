"""A real HTTP server on loopback that records what is POSTed to it, answering with scripted statuses."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.support.loopback import loopback


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    statuses: list[int]  # answered in turn; 200 once they run out
    received: list[Received] = field(default_factory=list)


@contextmanager
def webhook_receiver(statuses: list[int] | None = None) -> Iterator[Receiver]:
    """Serve on a free loopback port while the block runs."""
    receiver = Receiver(url="", statuses=list(statuses or []))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            receiver.received.append(Received(self.path, dict(self.headers.items()), body))
            self.send_response(receiver.statuses.pop(0) if receiver.statuses else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    with loopback(Handler) as base:
        receiver.url = f"{base}/hooks/spechub"
        yield receiver
