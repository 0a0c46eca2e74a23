"""A small typed client of SpecHub's REST API, for notebooks and CI.

    from spechub.client import Client
    client = Client.from_environment()          # SPECHUB_URL / SPECHUB_TOKEN, or the config file
    submission = client.submit(draft="org/head", verifier="org/model")
    run = client.wait(submission["run"], on_progress=print)

Every error the server answers comes back as `SpecHubError` with its code and message; so does an answer that is
not the shape spechub.shapes says (naming the field), and one past `max_answer_bytes`.

The token goes only to the server it was configured with (SPECHUB_URL or the config file's `url`;
a token given with no configured server goes to the server named), only on calls that need a
sign-in, and never over plain http to another machine unless `allow_http` says so. A config file
that others may write is refused, and one holding a token that others may read, as ssh refuses
its keys.
"""

from __future__ import annotations

import ipaddress
import math
import os
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urljoin, urlsplit

import httpx

from kernel.transparency.entries import ConsistencyProof, EntryPage, EntryProof
from spechub import capped, checked
from spechub.shapes import (
    GateReport,
    Ingested,
    Judgement,
    LogCheckpoint,
    PairDetail,
    PublicKey,
    Recommendations,
    Run,
    RunPage,
    Settings,
    Snapshot,
    Submission,
    Workload,
    WorkloadReport,
)

FINAL_STATES = frozenset({"finished", "failed_user", "failed_infra", "cancelled"})
CONFIG = Path("~/.config/spechub/config.toml")
_SET_URL = "--url, SPECHUB_URL or the config file's url"
_Shape = TypeVar("_Shape")


class SpecHubError(Exception):
    """The server refused a request: its HTTP status, its error code and its message."""

    def __init__(self, status: int, code: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status, self.code, self.message = status, code, message
        self.retry_after = retry_after  # the seconds a 429 or 503 asked us to wait, when it said


def config_file() -> Path:
    return Path(os.environ.get("SPECHUB_CONFIG") or CONFIG).expanduser()


def config() -> Settings:
    """The config file's settings ({} when there is none); refused when others may change it or read a token in it."""
    path = config_file()
    if not path.is_file():
        return {}
    mode = path.stat().st_mode
    if mode & 0o022:
        raise SpecHubError(0, "client:config-unsafe",
                           f"{path} is writable by others, who could point you at their server: chmod 600 {path}")  # fmt: skip
    try:
        stored = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SpecHubError(0, "client:config-invalid", f"{path}: {exc}") from None
    except RecursionError:  # arrays nested deeper than the parser's stack
        said = f"{path}: nested too deeply to read; the file holds only url and token"
        raise SpecHubError(0, "client:config-invalid", said) from None
    if stored.get("token") and mode & 0o044:
        raise SpecHubError(0, "client:config-unsafe", f"{path} holds your token and others may read it: chmod 600 {path}")
    return _settings(stored, path)


def _settings(stored: dict[str, object], path: Path) -> Settings:
    """The file's url and token; any other key is not the client's."""
    settings: Settings = {}
    if (url := _string(stored, "url", path)) is not None:
        settings["url"] = url
    if (token := _string(stored, "token", path)) is not None:
        settings["token"] = token
    return settings


def _string(stored: dict[str, object], key: str, path: Path) -> str | None:
    """`key`'s value, refused unless a string: url = 8000 names no server, and token = 12 would be sent as a token."""
    value = stored.get(key)
    if value is None or isinstance(value, str):
        return value
    raise SpecHubError(0, "client:config-invalid", f'{path}: {key} must be a quoted string ({key} = "..."), not {value!r}')


def normalised(url: str) -> str:
    return url.strip().rstrip("/")


def plain_http_check(url: str, *, allow_http: bool) -> None:
    """Refuse a URL that is not https, unless it is plain http to this machine, or plain http was allowed."""
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError:  # an unbalanced [ in an IPv6 host
        hostname = None
    if not hostname or parts.scheme not in ("http", "https"):
        raise SpecHubError(0, "client:bad-url", f"{url!r} is not a server URL; give one like https://spechub.example")
    if parts.scheme == "https" or allow_http or _loopback(hostname):
        return
    said = "Use https://, or pass --allow-http (SPECHUB_ALLOW_HTTP=1) on a network you trust."
    raise SpecHubError(
        0, "client:plain-http", f"{url} is plain http to another machine: a token would cross it unencrypted. {said}"
    )


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Client:
    base_url: str
    token: str | None = None
    timeout: float = 60.0
    max_answer_bytes: int = capped.DEFAULT_MIB * 2**20

    @classmethod
    def from_environment(cls, url: str | None = None, token: str | None = None, *, allow_http: bool = False) -> Client:
        """Return a client for `url`, else SPECHUB_URL, else the config file's `url`; the token likewise, for the
        configured server only.

        The config file (SPECHUB_CONFIG, by default ~/.config/spechub/config.toml) holds `url = "..."`
        and `token = "..."`.
        """
        stored = config()
        configured = os.environ.get("SPECHUB_URL") or stored.get("url")
        found = url or configured
        if not found:
            raise SpecHubError(0, "client:no-server", f"Name a SpecHub server: --url, SPECHUB_URL, or `url` in {config_file()}.")
        plain_http_check(found, allow_http=allow_http or os.environ.get("SPECHUB_ALLOW_HTTP") == "1")
        secret = token or os.environ.get("SPECHUB_TOKEN") or stored.get("token")
        if not token and configured and normalised(found) != normalised(configured):
            secret = None  # the stored token is the configured server's, never another's
        return cls(normalised(found), secret)

    def _request(self, method: str, path: str, *, auth: bool = False, **options: Any) -> httpx.Response:
        headers = {"Accept-Encoding": capped.ENCODINGS}
        if auth and self.token:
            headers["Authorization"] = f"Token {self.token}"
        headers.update(options.pop("headers", None) or {})
        try:
            with (
                httpx.Client(timeout=self.timeout, follow_redirects=False) as http,
                http.stream(method, f"{self.base_url}{path}", headers=headers, **options) as streamed,
            ):
                answer = self._whole(streamed, f"{method} {path}")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise SpecHubError(0, "client:unreachable", f"{self.base_url}: {exc}") from None
        if not answer.is_success:
            raise _redirected(answer, self.base_url) if 300 <= answer.status_code < 400 else _refusal(answer)
        return answer

    def _whole(self, streamed: httpx.Response, asked: str) -> httpx.Response:
        """The streamed answer read whole, decoded, up to max_answer_bytes; SpecHubError past it."""
        try:
            body = capped.body(streamed, self.max_answer_bytes)
        except capped.TooLarge as large:
            said = f"{self.base_url} answered {asked} with {large}, more than this client reads"
            raise SpecHubError(0, "client:answer-too-large", f"{said}: pass --max-answer-mb with a larger cap "
                               "if the server is the SpecHub you meant.") from None  # fmt: skip
        except capped.Unread as unread:
            raise SpecHubError(0, "client:not-json", f"{self.base_url} answered {asked} with {unread}: check that the URL "
                               f"is the SpecHub server's ({_SET_URL}).") from None  # fmt: skip
        kept = [(key, value) for key, value in streamed.headers.multi_items()
                if key.lower() not in ("content-encoding", "content-length")]  # fmt: skip
        return httpx.Response(streamed.status_code, headers=kept, content=body, request=streamed.request)

    def _json(self, method: str, path: str, *, auth: bool = False, **options: Any) -> object:
        """The answer's JSON; SpecHubError when a 2xx is not JSON (a proxy's page, or not SpecHub at this URL)."""
        answer = self._request(method, path, auth=auth, **options)
        try:
            return answer.json()
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser's stack
            raise _not_json(answer, self.base_url) from None

    def _answer(self, shape: type[_Shape], method: str, path: str, *, auth: bool = False, **options: Any) -> _Shape:
        """The answer read as `shape`, a TypedDict of spechub.shapes or a list of one, checked field by field
        (spechub.checked); SpecHubError naming the first field that is not what the shape says, and the server."""
        found = self._json(method, path, auth=auth, **options)
        try:
            checked.check(found, shape)
        except checked.WrongShape as wrong:
            said = f"{self.base_url} answered {method} {path} in a shape this client does not read: {wrong}"
            raise SpecHubError(0, "client:unexpected-answer", f"{said}. Is this SpecHub, at a version this spechub "
                               "speaks to?") from None  # fmt: skip
        return cast(_Shape, found)

    def compatibility(self, *, verifier: str, draft: str | None = None, method: str | None = None, k: int | None = None,
                      verifier_revision: str = "main", draft_revision: str = "main") -> GateReport:  # fmt: skip
        """The gate's verdict on a pair, creating nothing."""
        body = {"verifier": verifier, "verifier_revision": verifier_revision, "draft": draft or "",
                "draft_revision": draft_revision, "method": method, "num_speculative_tokens": k}  # fmt: skip
        return self._answer(GateReport, "POST", "/api/v1/compatibility/", json={k: v for k, v in body.items() if v is not None})

    def submit(self, *, draft: str, verifier: str = "", revision: str = "main", verifier_revision: str = "main",
               method: str | None = None, k: int | None = None) -> Submission:  # fmt: skip
        """Submit a draft (signed in): the gate's verdict, and the queued run's id in `run`."""
        body = {"repo_id": draft, "revision": revision, "verifier_repo_id": verifier,
                "verifier_revision": verifier_revision, "method": method, "num_speculative_tokens": k}  # fmt: skip
        given = {k: v for k, v in body.items() if v is not None}
        return self._answer(Submission, "POST", "/api/v1/submissions/", auth=True, json=given)

    def run(self, run_id: int) -> Run:
        return self._answer(Run, "GET", f"/api/v1/runs/{run_id}/", auth=True)

    def runs(self) -> list[Run]:
        """The newest page of runs."""
        return self._answer(RunPage, "GET", "/api/v1/runs/", auth=True)["results"]

    def pair(self, pair_id: int) -> PairDetail:
        return self._answer(PairDetail, "GET", f"/api/v1/pairs/{pair_id}/")

    def recommend(self, *, verifier: str, concurrency: int = 1, hardware: str = "cpu", workload: str = "") -> Recommendations:
        params = {"verifier": verifier, "concurrency": concurrency, "hardware": hardware, "workload": workload}
        return self._answer(Recommendations, "GET", "/api/v1/recommendations/", params=params)

    def workload_upload(self, path: Path, *, verifier: str, name: str = "") -> Workload:
        """Upload your own traffic for a verifier (streamed as multipart); the same requests again return the first upload."""
        with path.open("rb") as stream:
            files = {"file": (path.name, stream, "application/octet-stream")}
            fields = {"verifier": verifier, "name": name}
            return self._answer(Workload, "POST", "/api/v1/workloads/", auth=True, data=fields, files=files)

    def workload_certify(self, workload_id: int, *, drafts: list[int] | str = "all", hardware: str = "cpu") -> list[Run]:
        """Certify drafts (pair ids, or "all" gate-compatible ones) on your workload, privately; return the queued runs."""
        path = f"/api/v1/workloads/{workload_id}/runs/"
        return self._answer(list[Run], "POST", path, auth=True, json={"drafts": drafts, "hardware": hardware})

    def workload_report(self, workload_id: int, *, concurrency: int = 1) -> WorkloadReport:
        path = f"/api/v1/workloads/{workload_id}/report/"
        return self._answer(WorkloadReport, "GET", path, auth=True, params={"concurrency": concurrency})

    def public_key(self) -> dict[str, str]:
        """The server's certificate key (PEM) and the issuer its certificates name; anonymous."""
        found = self._answer(PublicKey, "GET", "/api/v1/certificates/public-key/")
        return {"public_key_pem": found["public_key_pem"], "issuer": found["issuer"]}

    def log_checkpoint(self) -> LogCheckpoint:
        """The transparency log's latest signed checkpoint; anonymous."""
        return self._answer(LogCheckpoint, "GET", "/api/v1/log/checkpoint")

    def log_inclusion(self, certificate_sha256: str) -> EntryProof:
        """A certificate file's inclusion proof (by the file's SHA-256), and its revocation's, if it was revoked."""
        return self._answer(EntryProof, "GET", "/api/v1/log/proof/inclusion", params={"certificate": certificate_sha256})

    def log_consistency(self, old_size: int, new_size: int) -> ConsistencyProof:
        """The proof that the log of `new_size` extends the log of `old_size`."""
        params = {"from": old_size, "to": new_size}
        return self._answer(ConsistencyProof, "GET", "/api/v1/log/proof/consistency", params=params)

    def log_entries(self, start: int, end: int) -> EntryPage:
        """The log's entries from `start` up to `end` - 1, in order; a page may stop short of `end`."""
        return self._answer(EntryPage, "GET", "/api/v1/log/entries", params={"start": start, "end": end})

    def certificate_file(self, certificate_id: int) -> bytes:
        """The signed certificate file, byte for byte as issued."""
        return self._request("GET", f"/api/v1/certificates/{certificate_id}/download/", auth=True).content

    def judge(self, path: Path, *, verifier: str, draft: str = "", k: int | None = None, temperature: float | None = None,
              hardware: str = "cpu") -> Judgement:  # fmt: skip
        """Hold a `vllm bench serve` result file (or a saved /metrics) to its pair's certified band; anonymous. Without
        a temperature, the file's is used, else 0, and the answer says it was assumed."""
        fields = {"verifier": verifier, "draft": draft, "hardware": hardware, **({"k": k} if k is not None else {}),
                  **({"temperature": temperature} if temperature is not None else {})}  # fmt: skip
        with path.open("rb") as stream:
            files = {"file": (path.name, stream, "application/octet-stream")}
            return self._answer(Judgement, "POST", "/api/v1/judge/", data=fields, files=files)

    def push_observations(self, deployment: int, snapshots: list[Snapshot], *, ingest_token: str) -> Ingested:
        """Push a deployment's counter snapshots (`spechub watch`) with its write-only ingest token, as a Bearer token;
        the API token never goes with it."""
        headers = {"Authorization": f"Bearer {ingest_token}"}
        path = f"/api/v1/deployments/{deployment}/observations/"
        return self._answer(Ingested, "POST", path, json={"snapshots": snapshots}, headers=headers)

    def wait(self, run_id: int, *, on_progress: Callable[[Run], None] | None = None, poll: float = 2.0,
             timeout: float = 3 * 3600) -> Run:  # fmt: skip
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
    """SpecHub's own error ({"error": {"code", "message"}}), else the status and the start of whatever answered."""
    try:
        found = answer.json()
    except (ValueError, RecursionError):
        found = None
    error = found.get("error") if isinstance(found, dict) else None
    error = error if isinstance(error, dict) else {}
    said = answer.text[:300].strip() or answer.reason_phrase
    return SpecHubError(answer.status_code, str(error.get("code", "http")), str(error.get("message", said)),
                        retry_after=_seconds(answer.headers.get("Retry-After")))  # fmt: skip


def _redirected(answer: httpx.Response, base_url: str) -> SpecHubError:
    """A redirect is never followed: the token would go with it. Say where it points, and the server URL to use."""
    said = f"{base_url} answered HTTP {answer.status_code}"
    target = answer.headers.get("Location", "")
    if not target:
        return SpecHubError(answer.status_code, "client:redirected", f"{said}, a redirect with no Location; check {_SET_URL}.")
    server = _server_of(urljoin(str(answer.request.url), target), answer.request.url.path, base_url)
    upgrade = " (the server wants https)" if urlsplit(server).scheme == "https" and base_url.startswith("http:") else ""
    advice = f"use {server} as the server URL ({_SET_URL})"
    return SpecHubError(answer.status_code, "client:redirected", f"{said}, redirecting to {target[:300]}{upgrade}: {advice}.")


def _server_of(target: str, asked: str, base_url: str) -> str:
    """The server URL a redirect points to: `target` less the API path that was asked, when it ends with it."""
    wanted = asked.removeprefix(urlsplit(base_url).path)
    parts = urlsplit(target)
    if wanted and parts.path.endswith(wanted):
        return f"{parts.scheme}://{parts.netloc}{parts.path.removesuffix(wanted)}"
    return f"{parts.scheme}://{parts.netloc}"


def _not_json(answer: httpx.Response, base_url: str) -> SpecHubError:
    kind = answer.headers.get("Content-Type") or "no Content-Type"
    return SpecHubError(answer.status_code, "client:not-json",
                        f"{base_url} answered HTTP {answer.status_code} with {kind}, not SpecHub's JSON: "
                        f"check that the URL is the SpecHub server's ({_SET_URL}).")  # fmt: skip


def _seconds(retry_after: str | None) -> float | None:
    """Retry-After in seconds from now: a number of seconds or an HTTP date; None when absent or unreadable."""
    if not retry_after:
        return None
    try:
        seconds = float(retry_after)
        return max(0.0, seconds) if math.isfinite(seconds) else None
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(retry_after) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None
