"""A test double of the Hub's write endpoints, on loopback: olah serves reads only.

It implements what huggingface_hub's create_commit calls for small files with
HF_HUB_DISABLE_XET=1: POST /api/models/{repo}/preupload/{revision} (every file "regular")
and POST /api/models/{repo}/commit/{revision} with an NDJSON body, answering
create_pr=1 with a pull-request URL. It records each commit it receives.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.loopback import loopback

_ROUTE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/(?P<action>preupload|commit)/(?P<revision>[^/?]+)$")


@dataclass
class Commit:
    repo_id: str
    revision: str
    create_pr: bool
    authorization: str
    header: dict[str, Any]
    files: dict[str, bytes]


@dataclass
class HubWriteDouble:
    endpoint: str = ""
    commits: list[Commit] = field(default_factory=list)


@contextmanager
def hub_write_double() -> Iterator[HubWriteDouble]:
    double = HubWriteDouble()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            url = urlsplit(self.path)
            route = _ROUTE.match(url.path)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if route is None:
                return self._answer(404, {"error": f"no route {url.path}"})
            if route["action"] == "preupload":
                files = json.loads(body)["files"]
                return self._answer(
                    200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
                )
            return self._commit(route, parse_qs(url.query).get("create_pr") == ["1"], body)

        def _commit(self, route: re.Match[str], create_pr: bool, body: bytes) -> None:
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
            header = next(line["value"] for line in lines if line["key"] == "header")
            files = {line["value"]["path"]: base64.b64decode(line["value"]["content"]) for line in lines if line["key"] == "file"}
            auth = self.headers.get("Authorization", "")
            double.commits.append(Commit(route["repo"], route["revision"], create_pr, auth, header, files))
            number = len(double.commits)
            self._answer(200, {
                "commitUrl": f"{double.endpoint}/{route['repo']}/commit/{'0' * 39}{number}",
                "commitOid": f"{'0' * 39}{number}",
                "pullRequestUrl": f"{double.endpoint}/{route['repo']}/discussions/{number}" if create_pr else None,
            })  # fmt: skip

        def _answer(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            return

    with loopback(Handler) as double.endpoint:
        yield double
