"""A loopback test double of the Hub's collection listing (GET /api/collections/{slug}), which olah does not serve."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from tests.support.loopback import loopback


def collection(slug: str, models: list[str]) -> dict[str, object]:
    """The JSON the Hub answers for a collection of these models, with a paper among them as real ones have."""
    items = [{"_id": f"{n:024x}", "id": repo, "type": "model", "position": n} for n, repo in enumerate(models)]
    items.insert(1, {"_id": "f" * 24, "id": "2401.00001", "type": "paper", "position": 99})
    owner = {"name": slug.split("/")[0]}
    return {"slug": slug, "title": "Speculators", "owner": owner, "items": items, "lastUpdated": "2026-11-30T12:00:00.000Z",
            "position": 0, "private": False, "theme": "blue", "upvotes": 3}  # fmt: skip


@contextmanager
def collection_double(slug: str, models: list[str]) -> Iterator[str]:
    """Serve one collection on a free loopback port; yield the endpoint. Any other path is a 404 as on the Hub."""
    body = json.dumps(collection(slug, models)).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path.split("?")[0] == f"/api/collections/{slug}"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) if found else 2))
            self.end_headers()
            self.wfile.write(body if found else b"{}")

        def log_message(self, *args: object) -> None:
            return

    with loopback(Handler) as endpoint:
        yield endpoint
