"""A loopback test double of the Hub's answers to authentication, for gated repos (olah serves none).

It answers the way huggingface.co does, as huggingface_hub reads it: repo metadata is public,
and a gated repo's files answer 401 with `X-Error-Code: GatedRepo` without a token, 403 with it
for a token not granted access, 401 "Invalid credentials in Authorization header" for a token
the Hub does not know, and the file for a token granted access.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.support.loopback import loopback

REPO = "gated-org/gated-verifier"
SHA = "c" * 40
GRANTED, NOT_GRANTED = "hf_granted_token_value", "hf_not_granted_token_value"
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "vocab_size": 2048,
          "num_hidden_layers": 4}  # fmt: skip


@dataclass
class HubAuthDouble:
    endpoint: str = ""
    authorizations: list[str] = field(default_factory=list)  # the Authorization header of every request, "" for none


def _answer(handler: BaseHTTPRequestHandler, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
        handler.send_header(name, value)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


def _route(handler: BaseHTTPRequestHandler, double: HubAuthDouble) -> None:
    authorization = handler.headers.get("Authorization", "")
    double.authorizations.append(authorization)
    path = handler.path.split("?")[0]
    if path.startswith(f"/api/models/{REPO}/revision/"):
        info = {"id": REPO, "modelId": REPO, "sha": SHA, "gated": "manual", "siblings": [{"rfilename": "config.json"}]}
        return _answer(handler, 200, json.dumps(info).encode(), {"Content-Type": "application/json"})
    if path.startswith(f"/api/models/{REPO}/tree/"):
        tree = [{"type": "file", "path": "config.json", "size": 120, "oid": "0" * 40}]
        return _answer(handler, 200, json.dumps(tree).encode(), {"Content-Type": "application/json"})
    if path.startswith(f"/{REPO}/resolve/"):
        return _gated_file(handler, authorization)
    return _answer(handler, 404, b"{}", {"X-Error-Code": "RepoNotFound"})


def _gated_file(handler: BaseHTTPRequestHandler, authorization: str) -> None:
    gated = f"Access to model {REPO} is restricted. You must have access to it and be authenticated to access it."
    if not authorization:
        return _answer(handler, 401, b"{}", {"X-Error-Code": "GatedRepo", "X-Error-Message": gated})
    token = authorization.removeprefix("Bearer ")
    if token == NOT_GRANTED:
        return _answer(handler, 403, b"{}", {"X-Error-Code": "GatedRepo", "X-Error-Message": gated})
    if token != GRANTED:
        return _answer(handler, 401, b"{}", {"X-Error-Message": "Invalid credentials in Authorization header"})
    body = json.dumps(CONFIG).encode()
    return _answer(handler, 200, body, {"Content-Type": "application/json", "X-Repo-Commit": SHA, "ETag": '"cfg"'})


@contextmanager
def hub_auth_double() -> Iterator[HubAuthDouble]:
    """Serve the test double on a free loopback port while the block runs."""
    double = HubAuthDouble()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            _route(self, double)

        def do_HEAD(self) -> None:
            _route(self, double)

        def log_message(self, *args: object) -> None:
            return

    with loopback(Handler) as double.endpoint:
        yield double
