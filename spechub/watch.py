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
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from spechub.client import Client, SpecHubError

COUNTER_FAMILIES = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}
PER_POSITION_FAMILY = "vllm:spec_decode_num_accepted_tokens_per_pos"
REQUESTS_FAMILY = "vllm:request_success"
STARTED_FAMILY = "process_start_time_seconds"
MAX_BYTES = 8 * 1024 * 1024  # a vLLM /metrics is tens of KiB; more is not an exposition we should hold in memory
SCRAPE_TIMEOUT = 10.0
MAX_REDIRECTS = 3
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


def snapshot(text: str, *, read_at: float, engine_version: str | None, source: str) -> Snapshot:
    """Parse a Prometheus exposition into a snapshot, each counter summed over its other labels (model_name, engine)."""
    from prometheus_client.parser import text_string_to_metric_families

    totals = dict.fromkeys(COUNTER_FAMILIES.values(), 0)
    per_position: dict[int, int] = {}
    requests, started, speculating = 0, None, False
    try:
        for family in text_string_to_metric_families(text):
            speculating = speculating or family.name in COUNTER_FAMILIES
            for sample in family.samples:
                # `_created` comes as its own gauge family in the text format; `_total` is the count.
                counted, value = sample.name.endswith("_total"), sample.value
                if family.name in COUNTER_FAMILIES and counted:
                    totals[COUNTER_FAMILIES[family.name]] += int(value)
                elif family.name == PER_POSITION_FAMILY and counted:
                    position = int(sample.labels.get("position", 0))
                    per_position[position] = per_position.get(position, 0) + int(value)
                elif family.name == REQUESTS_FAMILY and counted:
                    requests += int(value)
                elif family.name == STARTED_FAMILY:
                    started = value if started is None else min(started, value)  # several processes: the oldest
    except ValueError as exc:
        raise WatchError(f"{source} is not a Prometheus exposition: {exc}") from None
    if not speculating:
        raise WatchError(f"speculative decoding is not on for this server (no vllm:spec_decode_* counters at {source})")
    positions = [per_position.get(i, 0) for i in range(max(per_position, default=-1) + 1)]
    return Snapshot(read_at=read_at, per_position=positions, requests=requests, started_at=started,
                    engine_version=engine_version, k=len(positions) or None, **totals)  # fmt: skip


def fetch(url: str) -> str:
    """GET `url` with a timeout and a size cap, following redirects only within its own scheme, host and port."""
    origin = urlsplit(url)[:2]
    with httpx.Client(timeout=SCRAPE_TIMEOUT, follow_redirects=False) as http:
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
    """The body, refused past MAX_BYTES or past the timeout overall (httpx's timeout is per read: a trickle beats it)."""
    read, deadline = bytearray(), time.monotonic() + SCRAPE_TIMEOUT
    for chunk in answer.iter_bytes():
        read += chunk
        if len(read) > MAX_BYTES:
            raise WatchError(f"{url} answered more than {MAX_BYTES // 2**20} MiB; that is not a vLLM /metrics")
        if time.monotonic() > deadline:
            raise WatchError(f"{url} took more than {SCRAPE_TIMEOUT:.0f} s to answer")
    return read.decode("utf-8", errors="replace")


def engine_version(metrics_url: str) -> str | None:
    """The vLLM version the same server answers on /version ({"version": "0.32.0"}); None when it does not say."""
    parts = urlsplit(metrics_url)
    try:
        answered = json.loads(fetch(f"{parts.scheme}://{parts.netloc}/version"))
    except (httpx.HTTPError, WatchError, ValueError):
        return None
    version = answered.get("version") if isinstance(answered, dict) else None
    return str(version) if version else None


def scrape(url: str) -> Snapshot:
    """Read the server's counters now, and its engine version."""
    try:
        text = fetch(url)
    except httpx.HTTPError as exc:
        raise WatchError(f"cannot read {url}: {exc}") from None
    read_at = time.time()  # when the counters were read, not when the version was
    return snapshot(text, read_at=read_at, engine_version=engine_version(url), source=url)


def saved(path: Path) -> Snapshot:
    """A saved exposition, read as of the file's modification time (no engine version: no server to ask)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise WatchError(f"{path} is more than {MAX_BYTES // 2**20} MiB; that is not a vLLM /metrics")
        return snapshot(path.read_text(errors="replace"), read_at=path.stat().st_mtime, engine_version=None, source=str(path))
    except OSError as exc:
        raise WatchError(f"cannot read {path}: {exc}") from None


def push(client: Client, deployment: int, token: str, shot: Snapshot) -> dict[str, Any]:
    """Push one snapshot and print what SpecHub made of it; SpecHubError when it refused."""
    answer = client.push_observations(deployment, [asdict(shot)], ingest_token=token)
    counts = (f"{shot.drafts} drafts, {shot.accepted}/{shot.draft_tokens} draft tokens accepted, "
              f"{shot.requests} requests")  # fmt: skip
    print(f"{_when(shot.read_at)}  deployment {deployment}: {counts} → {answer.get('state')}: {answer.get('reason')}", flush=True)
    return answer


def command(client: Client, args: argparse.Namespace) -> int:
    """`spechub watch`: one saved snapshot (--once), or scrape and push every --every seconds."""
    token = args.token or os.environ.get("SPECHUB_INGEST_TOKEN")
    if not token:
        return _refused("give the deployment's ingest token: --token or SPECHUB_INGEST_TOKEN")
    if args.once:
        try:
            shot = saved(args.once)
        except WatchError as exc:
            return _refused(str(exc))
        push(client, args.deployment, token, shot)  # a refusal is main's to report and exit on
        return 0
    if urlsplit(args.metrics).scheme not in ("http", "https") or not urlsplit(args.metrics).hostname:
        return _refused(f"{args.metrics!r} is not a metrics URL; give one like http://127.0.0.1:8000/metrics")
    if args.every <= 0 or (args.count is not None and args.count < 1):
        return _refused("--every and --count must be positive")
    return watch(client, args.deployment, token, url=args.metrics, every=args.every, count=args.count)


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
        if error.status == 401:
            raise  # the token is revoked or wrong: every later push would be refused too
        # Not stored; the next push's window spans this one, so nothing is lost by going on.
        _say(f"{error.code}: {error.message}" + (f" (HTTP {error.status})" if error.status else ""))
        if error.status == 429:
            return error.retry_after if error.retry_after is not None else RATE_LIMITED_WAIT
    return 0.0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the watch as Ctrl-C does


def _say(message: str) -> None:
    print(f"{_when(time.time())}  spechub: {message}", file=sys.stderr, flush=True)


def _refused(message: str) -> int:
    print(f"spechub: {message}", file=sys.stderr)
    return INVALID


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")
