"""`spechub watch`: read a vLLM server's spec-decode counters where it runs, and push them to SpecHub.

    spechub watch --deployment 7 --metrics http://127.0.0.1:8000/metrics --every 60    # until Ctrl-C or SIGTERM
    spechub watch --deployment 7 --once metrics.txt                                  # one saved exposition

Each push is the counters as read (cumulative) with the time they were read: SpecHub measures the window between
two consecutive snapshots, so a push that is lost or refused loses nothing; the next one's window spans it.
The deployment's write-only ingest token (--token or SPECHUB_INGEST_TOKEN) goes with the push only, as a Bearer
token; it is not the API token and is never printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import stat
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from urllib.parse import urljoin, urlsplit

import httpx

from kernel import exposition
from kernel.plain import shown
from spechub import capped, shapes
from spechub.client import Client, SpecHubError

# The exposition's names: kernel.exposition reads the text, one reader for `spechub watch` and `spechub judge`.
COUNTER_FAMILIES, PER_POSITION_FAMILY = exposition.COUNTER_FAMILIES, exposition.PER_POSITION_FAMILY
REQUESTS_FAMILY, STARTED_FAMILY = exposition.REQUESTS_FAMILY, exposition.STARTED_FAMILY
SPEC_DECODE_PREFIX, MAX_POSITIONS = exposition.SPEC_DECODE_PREFIX, exposition.MAX_POSITIONS
MAX_BYTES = 8 * 1024 * 1024  # a vLLM /metrics is tens of KiB; more is not an exposition we should hold in memory
SCRAPE_TIMEOUT = 10.0
MAX_REDIRECTS = 3
ENCODINGS = capped.ENCODINGS  # what _capped decodes itself, under the cap
MAX_EVERY = 24 * 3600.0  # seconds; also the longest a Retry-After is slept
QUOTED_CHARS = exposition.QUOTED_CHARS
RATE_LIMITED_WAIT = 60.0  # a 429 without Retry-After
INVALID = 1


class WatchError(Exception):
    """The metrics could not be read or hold no spec-decode counters: the scrape's fault, not SpecHub's."""


@dataclass(frozen=True)
class Snapshot:
    """The counters as read at `read_at`: the push's contract with SpecHub's observations endpoint."""

    read_at: float
    drafts: int
    draft_tokens: int
    accepted: int
    per_position: list[int]
    requests: int
    started_at: float | None
    engine_version: str | None
    k: int | None

    def as_dict(self) -> shapes.Snapshot:
        """Return the snapshot as the observations endpoint reads it."""
        return {"read_at": self.read_at, "drafts": self.drafts, "draft_tokens": self.draft_tokens, "accepted": self.accepted,
                "per_position": self.per_position, "requests": self.requests, "started_at": self.started_at,
                "engine_version": self.engine_version, "k": self.k}  # fmt: skip


def snapshot(text: str, *, read_at: float, engine_version: str | None, source: str) -> Snapshot:
    """Parse a Prometheus exposition into a snapshot, each counter summed over its other labels (model_name, engine)."""
    try:
        read = exposition.read(text, source=source)
    except exposition.Unreadable as exc:
        raise WatchError(str(exc)) from None
    positions = list(read.per_position)
    return Snapshot(read_at=read_at, drafts=read.drafts, draft_tokens=read.draft_tokens, accepted=read.accepted,
                    per_position=positions, requests=read.requests, started_at=read.started, engine_version=engine_version,
                    k=len(positions) or None)  # fmt: skip


def fetch(url: str) -> str:
    """GET `url` with a timeout and a size cap, following redirects only within its own scheme, host and port."""
    origin = urlsplit(url)[:2]
    with httpx.Client(timeout=SCRAPE_TIMEOUT, follow_redirects=False, headers={"Accept-Encoding": ENCODINGS}) as http:
        for _ in range(MAX_REDIRECTS + 1):
            with http.stream("GET", url) as answer:
                if not answer.is_redirect:
                    answer.raise_for_status()
                    return _capped(answer, url)
                target = urljoin(url, answer.headers.get("Location", ""))
            if urlsplit(target)[:2] != origin:
                raise WatchError(f"{url} redirects to another server ({target}); give the URL to read directly")
            url = target
    raise WatchError(f"{url}: more than {MAX_REDIRECTS} redirects")


def _capped(answer: httpx.Response, url: str) -> str:
    """The body, refused past MAX_BYTES or past the timeout overall (httpx's timeout is per read: a trickle beats it),
    read by spechub.capped: no more than one byte past the cap is ever inflated."""
    try:
        read = capped.body(answer, MAX_BYTES, time.monotonic() + SCRAPE_TIMEOUT)
    except capped.TooLarge:
        raise WatchError(f"{url} answered more than {MAX_BYTES // 2**20} MiB; that is not a vLLM /metrics") from None
    except capped.TooSlow:
        raise WatchError(f"{url} took more than {SCRAPE_TIMEOUT:.0f} s to answer") from None
    except capped.Unread as unread:
        raise WatchError(f"{url} answered {unread}; serve it plain or gzip") from None
    return read.decode("utf-8", errors="replace")


def engine_version(metrics_url: str) -> str | None:
    """The vLLM version the same server answers on /version ({"version": "0.32.0"}); None when it does not say."""
    parts = urlsplit(metrics_url)
    try:
        answered = json.loads(fetch(f"{parts.scheme}://{parts.netloc}/version"))
    except (httpx.HTTPError, httpx.InvalidURL, WatchError, ValueError, RecursionError):
        return None
    version = answered.get("version") if isinstance(answered, dict) else None
    return str(version)[:QUOTED_CHARS] if version else None


def scrape(url: str) -> Snapshot:
    """Read the server's counters now, and its engine version."""
    try:
        text = fetch(url)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:  # ValueError: a Location that is no URL
        raise WatchError(f"cannot read {url}: {exc}") from None
    read_at = time.time()  # when the counters were read, not when the version was
    return snapshot(text, read_at=read_at, engine_version=engine_version(url), source=url)


def saved(path: Path) -> Snapshot:
    """A saved exposition, read as of the file's modification time (no engine version: no server to ask).

    The cap counts the bytes read, not the size the file says it has: /dev/zero or a pipe says 0."""
    try:
        with path.open("rb") as stream:
            data, status = stream.read(MAX_BYTES + 1), os.fstat(stream.fileno())
    except OSError as exc:
        raise WatchError(f"cannot read {path}: {exc}") from None
    if len(data) > MAX_BYTES:
        raise WatchError(f"{path} is more than {MAX_BYTES // 2**20} MiB; that is not a vLLM /metrics")
    # A pipe or a device has no modification time that dates its counters: they are as of the reading.
    read_at = status.st_mtime if stat.S_ISREG(status.st_mode) else time.time()
    return snapshot(data.decode("utf-8", errors="replace"), read_at=read_at, engine_version=None, source=str(path))


def push(client: Client, deployment: int, token: str, shot: Snapshot) -> shapes.Ingested:
    """Push one snapshot and print what SpecHub made of it; SpecHubError when it refused."""
    answer = client.push_observations(deployment, [shot.as_dict()], ingest_token=token)
    counts = (f"{shot.drafts} drafts, {shot.accepted}/{shot.draft_tokens} draft tokens accepted, "
              f"{shot.requests} requests")  # fmt: skip
    print(f"{_when(shot.read_at)}  deployment {deployment}: {counts} → {shown(answer.get('state'))}: "
          f"{shown(answer.get('reason'))}", flush=True)  # fmt: skip
    return answer


def command(client: Client, args: argparse.Namespace) -> int:
    """`spechub watch`: one saved snapshot (--once), or scrape and push every --every seconds."""
    token = args.token or os.environ.get("SPECHUB_INGEST_TOKEN")
    if not token:
        return _refused("give the deployment's ingest token: --token or SPECHUB_INGEST_TOKEN")
    refusal = _arguments_refusal(args)
    if refusal:
        return _refused(refusal)
    if args.once:
        try:
            shot = saved(args.once)
        except WatchError as exc:
            return _refused(str(exc))
        push(client, args.deployment, token, shot)  # a refusal is main's to report and exit on
        return 0
    return watch(client, args.deployment, token, url=args.metrics, every=args.every, count=args.count)


def _arguments_refusal(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot run, or None; nan and inf are floats to argparse, and time.sleep refuses both."""
    if not (math.isfinite(args.every) and 0 < args.every <= MAX_EVERY):
        return f"--every must be a number of seconds above 0 and at most {MAX_EVERY:.0f} (a day), not {args.every}"
    if args.count is not None and args.count < 1:
        return f"--count must be 1 or more, not {args.count}"
    if args.metrics is not None and not _is_url(args.metrics):
        return f"{args.metrics[:200]!r} is not a metrics URL; give one like http://127.0.0.1:8000/metrics"
    return None


def _is_url(text: str) -> bool:
    try:
        parts = urlsplit(text)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:  # an unbalanced [ in an IPv6 host, a port that is not a number or past 65535
        return False


def watch(client: Client, deployment: int, token: str, *, url: str, every: float, count: int | None = None) -> int:
    """Scrape and push every `every` seconds, `count` times or until Ctrl-C or SIGTERM; a revoked token ends it."""
    stoppable = threading.current_thread() is threading.main_thread()  # signal handlers belong to the main thread
    previous = signal.signal(signal.SIGTERM, _interrupt) if stoppable else None
    rounds = 0
    try:
        while count is None or rounds < count:
            started = time.monotonic()
            asked = _round(client, deployment, token, url)
            rounds += 1
            if count is None or rounds < count:
                time.sleep(max(every - (time.monotonic() - started), asked))
    except KeyboardInterrupt:
        print(f"{_when(time.time())}  spechub: watch stopped", file=sys.stderr)
    finally:
        if stoppable:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)  # None: set outside Python
    return 0


def _round(client: Client, deployment: int, token: str, url: str) -> float:
    """One scrape and push; return the seconds SpecHub asked us to wait (429), else 0. A 401 ends the watch."""
    try:
        push(client, deployment, token, scrape(url))
    except WatchError as exc:
        _say(str(exc))
    except SpecHubError as error:
        if error.status == 401 or 300 <= error.status < 400:
            raise  # a revoked or wrong token, or the wrong URL (a redirect): every later push would be refused too
        # Not stored; the next push's window spans this one, so nothing is lost by going on.
        _say(f"{shown(error.code)}: {shown(error.message)}" + (f" (HTTP {error.status})" if error.status else ""))
        if error.status == 429:
            return min(error.retry_after, MAX_EVERY) if error.retry_after is not None else RATE_LIMITED_WAIT
    return 0.0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the watch as Ctrl-C does


def _say(message: str) -> None:
    print(f"{_when(time.time())}  spechub: {message}", file=sys.stderr, flush=True)


def _refused(message: str) -> int:
    print(f"spechub: {message}", file=sys.stderr)
    return INVALID


def _when(epoch: float) -> str:
    try:
        return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):  # a saved file's modification time past what datetime holds
        return f"{epoch:.0f} s since the epoch"
