"""A small typed client of SpecHub's REST API, for notebooks and CI.

    from spechub.client import Client
    client = Client.from_environment()          # SPECHUB_URL / SPECHUB_TOKEN, or the config file
    submission = client.submit(draft="org/head", verifier="org/model")
    run = client.wait(submission["run"], on_progress=print)

Every error the server answers comes back as `SpecHubError` with its code and message.
"""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

FINAL_STATES = frozenset({"finished", "failed_user", "failed_infra", "cancelled"})
CONFIG = Path("~/.config/spechub/config.toml")


class SpecHubError(Exception):
    """The server refused a request: its HTTP status, its error code and its message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status, self.code, self.message = status, code, message


def config_file() -> Path:
    return Path(os.environ.get("SPECHUB_CONFIG") or CONFIG).expanduser()


@dataclass
class Client:
    base_url: str
    token: str | None = None
    timeout: float = 60.0

    @classmethod
    def from_environment(cls, url: str | None = None, token: str | None = None) -> Client:
        """Return a client for `url`, else SPECHUB_URL, else the config file's `url`; the token likewise.

        The config file (SPECHUB_CONFIG, by default ~/.config/spechub/config.toml) holds `url = "..."`
        and `token = "..."`.
        """
        path = config_file()
        stored: dict[str, Any] = tomllib.loads(path.read_text()) if path.is_file() else {}
        found = url or os.environ.get("SPECHUB_URL") or stored.get("url")
        if not found:
            raise SpecHubError(0, "client:no-server", f"Name a SpecHub server: --url, SPECHUB_URL, or `url` in {path}.")
        return cls(str(found).rstrip("/"), token or os.environ.get("SPECHUB_TOKEN") or stored.get("token"))

    def _request(self, method: str, path: str, **options: Any) -> httpx.Response:
        headers = {"Authorization": f"Token {self.token}"} if self.token else {}
        try:
            answer = httpx.request(method, f"{self.base_url}{path}", headers=headers, timeout=self.timeout, **options)
        except httpx.HTTPError as exc:
            raise SpecHubError(0, "client:unreachable", f"{self.base_url}: {exc}") from None
        if answer.status_code >= 400:
            raise _refusal(answer)
        return answer

    def _json(self, method: str, path: str, **options: Any) -> Any:
        return self._request(method, path, **options).json()

    def compatibility(self, *, verifier: str, draft: str | None = None, method: str | None = None, k: int | None = None,
                      verifier_revision: str = "main", draft_revision: str = "main") -> dict[str, Any]:  # fmt: skip
        """The gate's verdict on a pair, creating nothing."""
        body = {"verifier": verifier, "verifier_revision": verifier_revision, "draft": draft or "",
                "draft_revision": draft_revision, "method": method, "num_speculative_tokens": k}  # fmt: skip
        return dict(self._json("POST", "/api/v1/compatibility/", json={k: v for k, v in body.items() if v is not None}))

    def submit(self, *, draft: str, verifier: str = "", revision: str = "main", verifier_revision: str = "main",
               method: str | None = None, k: int | None = None) -> dict[str, Any]:  # fmt: skip
        """Submit a draft (signed in): the gate's verdict, and the queued run's id in `run`."""
        body = {"repo_id": draft, "revision": revision, "verifier_repo_id": verifier,
                "verifier_revision": verifier_revision, "method": method, "num_speculative_tokens": k}  # fmt: skip
        return dict(self._json("POST", "/api/v1/submissions/", json={k: v for k, v in body.items() if v is not None}))

    def run(self, run_id: int) -> dict[str, Any]:
        return dict(self._json("GET", f"/api/v1/runs/{run_id}/"))

    def runs(self) -> list[dict[str, Any]]:
        """The newest page of runs."""
        return list(self._json("GET", "/api/v1/runs/")["results"])

    def pair(self, pair_id: int) -> dict[str, Any]:
        return dict(self._json("GET", f"/api/v1/pairs/{pair_id}/"))

    def recommend(self, *, verifier: str, concurrency: int = 1, hardware: str = "cpu", workload: str = "") -> dict[str, Any]:
        params = {"verifier": verifier, "concurrency": concurrency, "hardware": hardware, "workload": workload}
        return dict(self._json("GET", "/api/v1/recommendations/", params=params))

    def workload_upload(self, path: Path, *, verifier: str, name: str = "") -> dict[str, Any]:
        """Upload your own traffic for a verifier (streamed as multipart); the same requests again return the first upload."""
        with path.open("rb") as stream:
            files = {"file": (path.name, stream, "application/octet-stream")}
            return dict(self._json("POST", "/api/v1/workloads/", data={"verifier": verifier, "name": name}, files=files))

    def workload_certify(
        self, workload_id: int, *, drafts: list[int] | str = "all", hardware: str = "cpu"
    ) -> list[dict[str, Any]]:
        """Certify drafts (pair ids, or "all" gate-compatible ones) on your workload, privately; return the queued runs."""
        return list(self._json("POST", f"/api/v1/workloads/{workload_id}/runs/", json={"drafts": drafts, "hardware": hardware}))

    def workload_report(self, workload_id: int, *, concurrency: int = 1) -> dict[str, Any]:
        return dict(self._json("GET", f"/api/v1/workloads/{workload_id}/report/", params={"concurrency": concurrency}))

    def public_key_pem(self) -> str:
        return str(self._json("GET", "/api/v1/certificates/public-key/")["public_key_pem"])

    def certificate_file(self, certificate_id: int) -> bytes:
        """The signed certificate file, byte for byte as issued."""
        return self._request("GET", f"/api/v1/certificates/{certificate_id}/download/").content

    def wait(self, run_id: int, *, on_progress: Callable[[dict[str, Any]], None] | None = None, poll: float = 2.0,
             timeout: float = 3 * 3600) -> dict[str, Any]:  # fmt: skip
        """Poll a run until it reaches a final state; call `on_progress` with each answer. Return the final run."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if on_progress:
                on_progress(run)
            if run["state"] in FINAL_STATES:
                return run
            if time.monotonic() > deadline:
                raise SpecHubError(0, "client:timeout", f"run {run_id} is still {run['state']} after {timeout:.0f} s")
            time.sleep(poll)


def _refusal(answer: httpx.Response) -> SpecHubError:
    try:
        error = answer.json().get("error") or {}
    except ValueError:
        error = {}
    return SpecHubError(answer.status_code, str(error.get("code", "http")), str(error.get("message", answer.text[:300])))
