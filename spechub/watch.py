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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

import httpx

from spechub import capped, shapes
from spechub.client import Client, SpecHubError

if TYPE_CHECKING:  # prometheus_client is imported when a text is parsed, not by every spechub command
    from prometheus_client.metrics_core import Metric
    from prometheus_client.samples import Sample

COUNTER_FAMILIES = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}
PER_POSITION_FAMILY = "vllm:spec_decode_num_accepted_tokens_per_pos"
REQUESTS_FAMILY = "vllm:request_success"
STARTED_FAMILY = "process_start_time_seconds"
SPEC_DECODE_PREFIX = "vllm:spec_decode_"
MAX_POSITIONS = 64  # draft positions; vLLM's num_speculative_tokens is a handful
MAX_BYTES = 8 * 1024 * 1024  # a vLLM /metrics is tens of KiB; more is not an exposition we should hold in memory
SCRAPE_TIMEOUT = 10.0
MAX_REDIRECTS = 3
ENCODINGS = capped.ENCODINGS  # what _capped decodes itself, under the cap
MAX_EVERY = 24 * 3600.0  # seconds; also the longest a Retry-After is slept
QUOTED_LINES, QUOTED_CHARS = 3, 100  # of the lines an error quotes from a metrics text
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
    from prometheus_client.parser import text_string_to_metric_families

    counts = _Counts()
    try:
        for family in text_string_to_metric_families(text):
            counts.add(family, source)
    except ValueError as exc:
        raise WatchError(f"{source} is not a Prometheus exposition: {exc}") from None
    if not counts.speculating:
        raise WatchError(f"speculative decoding is not on for this server (no vllm:spec_decode_* counters at {source})")
    if not counts.counted:
        raise WatchError(f"{source} has vllm:spec_decode_* metrics but no counter watch can read "
                         f"(vllm:spec_decode_num_drafts_total{{...}} 5 is one): {_unread(text)}")  # fmt: skip
    positions = [counts.per_position.get(i, 0) for i in range(max(counts.per_position, default=-1) + 1)]
    return Snapshot(read_at=read_at, per_position=positions, requests=counts.requests, started_at=counts.started,
                    engine_version=engine_version, k=len(positions) or None, **counts.totals)  # fmt: skip


@dataclass
class _Counts:
    """The counters summed so far, and whether the text speaks of spec decoding at all."""

    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTER_FAMILIES.values(), 0))
    per_position: dict[int, int] = field(default_factory=dict)
    requests: int = 0
    started: float | None = None
    speculating: bool = False
    counted: int = 0  # the spec-decode counter samples summed

    def add(self, family: Metric, source: str) -> None:
        # prometheus_client's own text names the family X and its samples X_total; OpenMetrics-style text typed as X
        # (or not typed) makes each X_total sample a family of its own, named X_total, of type unknown: the same counter.
        name = family.name.removesuffix("_total")
        self.speculating = self.speculating or name.startswith(SPEC_DECODE_PREFIX)
        for sample in family.samples:
            if name == STARTED_FAMILY and math.isfinite(sample.value):
                self.started = sample.value if self.started is None else min(self.started, sample.value)  # the oldest
            elif sample.name.endswith("_total"):  # `_created` comes as its own gauge family in the text format
                self._count(name, sample, source)

    def _count(self, name: str, sample: Sample, source: str) -> None:
        if name in COUNTER_FAMILIES:
            self.totals[COUNTER_FAMILIES[name]] += _count_of(sample, source)
            self.counted += 1
        elif name == PER_POSITION_FAMILY:
            position = _position(sample, source)
            self.per_position[position] = self.per_position.get(position, 0) + _count_of(sample, source)
        elif name == REQUESTS_FAMILY:
            self.requests += _count_of(sample, source)


def _count_of(sample: Sample, source: str) -> int:
    if not (math.isfinite(sample.value) and sample.value >= 0):
        raise WatchError(f"{source}: {sample.name} is {sample.value}, not a count")
    return int(sample.value)


def _position(sample: Sample, source: str) -> int:
    """The draft position a per-position sample counts; bounded, since the snapshot holds one count per position."""
    label = sample.labels.get("position", "0")
    try:
        position = int(label)
    except ValueError:
        position = -1
    if not 0 <= position < MAX_POSITIONS:
        raise WatchError(f"{source}: {sample.name} has position {label[:20]!r}, not one of 0 to {MAX_POSITIONS - 1}")
    return position


def _unread(text: str) -> str:
    """The first few spec-decode lines, samples before comments, each cut short: enough to see what they look like."""
    lines = [line.strip() for line in text.splitlines() if SPEC_DECODE_PREFIX in line]
    lines.sort(key=lambda line: line.startswith("#"))
    return ", ".join(repr(line[:QUOTED_CHARS]) for line in lines[:QUOTED_LINES]) or "no lines"


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
    print(f"{_when(shot.read_at)}  deployment {deployment}: {counts} → {answer.get('state')}: {answer.get('reason')}", flush=True)
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
        _say(f"{error.code}: {error.message}" + (f" (HTTP {error.status})" if error.status else ""))
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
