"""Live acceptance: a running deployment's spec-decode counters, as its watcher read them, held to its certificate.

The watcher pushes cumulative counters with the time it read them (a snapshot); SpecHub takes the window between
two consecutive snapshots, so a lost push loses nothing: the next window spans it. A server restart starts the
counters over; it is told by the server's own start time (`process_start_time_seconds`) or, where that is not
exposed, by every counter falling at once. The window after it holds what the new process counted.

AL in a window is 1 + accepted/drafts. Its interval treats each finished request, not each drafting step, as the
independent unit: a request's steps share its prompt and accept alike, so steps alone would give an interval far
narrower than the truth (tests/kernel/test_live.py simulates it). With only counts, the variance of a step's
accepted tokens comes exactly from the per-position counts (P(X >= i) is position i's share), and dividing it by
the requests, as if every step of a request accepted the same, bounds the variance of the mean from above.

Pure: no Django; the registry stores snapshots and judges through these functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kernel.stats import t_975

MIN_DRAFTS = 200  # drafting steps below which a window is too small to judge
MIN_REQUESTS = 8  # finished requests, likewise: the interval's units
COLLAPSE_AL = 1.2  # an interval wholly below this, with drafts still proposed, is what broken output looks like
MAX_POSITIONS = 64  # no engine drafts more tokens a step
MAX_COUNT = 2**62  # what a 64-bit counter column holds, with room to sum windows
EARLIEST, LATEST = 1e9, 1e10  # read_at in seconds since the epoch: 2001 to 2286
MAX_CLOCK_AHEAD = 300.0  # seconds a watcher's clock may run ahead of the server's; one far ahead would block every push

WITHIN, BELOW, COLLAPSE, TOO_SMALL, MISMATCH = "within", "below", "collapse", "too small", "mismatch"
VERDICTS = (WITHIN, BELOW, COLLAPSE, TOO_SMALL, MISMATCH)


class Refused(ValueError):
    """A snapshot that cannot be true: stored nothing, and the reason goes back to the watcher."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class Snapshot:
    read_at: float  # seconds since the epoch, on the watcher's clock
    drafts: int
    draft_tokens: int
    accepted: int
    per_position: tuple[int, ...]
    requests: int  # finished requests (vllm:request_success_total, over its labels)
    started_at: float | None = None  # the server process's start, where /metrics exposes it
    engine_version: str | None = None
    k: int | None = None  # the tokens the server drafts a step, from its per-position labels


@dataclass(frozen=True)
class Counts:
    """What a deployment counted over a span: additive, so windows sum into longer ones."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: tuple[int, ...] = ()
    requests: int = 0
    second: int | None = None  # Σ (tokens accepted)² over steps, where the positions were summed away

    @property
    def squares(self) -> int | None:
        """Σ (tokens accepted)² over the steps: given, or from the positions; None where neither tells."""
        if self.second is not None:
            return self.second
        return second_moment(self.per_position) if self.per_position or not self.drafts else None

    def __add__(self, other: Counts) -> Counts:
        return self._combine(other, 1)

    def __sub__(self, other: Counts) -> Counts:
        return self._combine(other, -1)

    def _combine(self, other: Counts, sign: int) -> Counts:
        width = max(len(self.per_position), len(other.per_position))
        mine, theirs = (list(c.per_position) + [0] * (width - len(c.per_position)) for c in (self, other))
        positions = tuple(a + sign * b for a, b in zip(mine, theirs, strict=True))
        # Only where positions are missing on a side must the squares be carried: otherwise they follow from them.
        carried = self.second is not None or other.second is not None
        squares = None if self.squares is None or other.squares is None else self.squares + sign * other.squares
        return Counts(
            self.drafts + sign * other.drafts,
            self.draft_tokens + sign * other.draft_tokens,
            self.accepted + sign * other.accepted,
            positions,
            self.requests + sign * other.requests,
            squares if carried else None,
        )


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    counts: Counts
    reset: bool = False  # the server restarted inside it: its counts are the new process's


def check(snapshot: Snapshot) -> None:
    """Refuse a snapshot no engine could have counted: negative or fractional counts, more accepted than drafted,
    per-position counts that rise with position, or positions beyond the k the deployment drafts."""
    counts = {"drafts": snapshot.drafts, "draft_tokens": snapshot.draft_tokens, "accepted": snapshot.accepted,
              "requests": snapshot.requests}  # fmt: skip
    for name, value in [*counts.items(), *((f"per_position[{i}]", v) for i, v in enumerate(snapshot.per_position))]:
        if not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise Refused("live:invalid-count", f"{name} is {value!r}: counters are whole numbers from 0 to {MAX_COUNT}.")
    if not (math.isfinite(snapshot.read_at) and EARLIEST <= snapshot.read_at <= LATEST):
        raise Refused("live:invalid-time", f"read_at is {snapshot.read_at!r}: give the time the counters were read, in "
                      "seconds since the epoch.")  # fmt: skip
    if snapshot.started_at is not None and not math.isfinite(snapshot.started_at):
        raise Refused("live:invalid-time", f"started_at is {snapshot.started_at!r}: give the server's start, or null.")
    if snapshot.accepted > snapshot.draft_tokens:
        raise Refused("live:impossible-ratio", f"{snapshot.accepted} tokens accepted of {snapshot.draft_tokens} drafted: "
                      "no engine accepts more than it drafts.")  # fmt: skip
    if snapshot.per_position and snapshot.per_position[0] > snapshot.drafts:
        raise Refused("live:impossible-ratio", f"position 1 accepted {snapshot.per_position[0]} times in {snapshot.drafts} "
                      "drafting steps.")  # fmt: skip
    if any(b > a for a, b in zip(snapshot.per_position, snapshot.per_position[1:], strict=False)):
        raise Refused("live:impossible-ratio", "a later position was accepted more often than an earlier one: a chain draft "
                      "reaches position i only through 1..i-1.")  # fmt: skip
    limit = snapshot.k if snapshot.k is not None else MAX_POSITIONS
    if not 1 <= limit <= MAX_POSITIONS or len(snapshot.per_position) > limit:
        raise Refused("live:positions-beyond-k", f"{len(snapshot.per_position)} positions counted with k={snapshot.k}: "
                      f"a server drafting k tokens a step counts positions 1 to k (k at most {MAX_POSITIONS}).")  # fmt: skip


def check_clock(snapshot: Snapshot, *, now: float) -> None:
    """Refuse a snapshot read, or a server started, more than MAX_CLOCK_AHEAD seconds after `now` (the server's clock):
    stored, it would put every correct snapshot after it out of order."""
    for name, when in (("read_at", snapshot.read_at), ("started_at", snapshot.started_at)):
        if when is not None and when > now + MAX_CLOCK_AHEAD:
            raise Refused("live:clock-ahead", f"the watcher's clock is ahead: {name} is {when:.10g}, more than "
                          f"{MAX_CLOCK_AHEAD:.0f} s after the server's clock ({now:.0f}). Set the watcher's clock right "
                          "(NTP) and push again; nothing was stored.")  # fmt: skip


def window(before: Snapshot, after: Snapshot) -> Window:
    """The counts between two snapshots of one deployment, read in that order."""
    if after.read_at <= before.read_at:
        raise Refused("live:out-of-order", f"read_at {after.read_at} is not after the last snapshot's ({before.read_at}).")
    now, then = _values(after), _values(before)
    if _restarted(before, after, now, then):
        return Window(before.read_at, after.read_at, _counts(after), reset=True)
    deltas = [a - b for a, b in zip(now, then, strict=True)]
    if any(d < 0 for d in deltas):
        raise Refused("live:counters-backwards", "counters went backwards without a restart (the server's start time did "
                      "not change): push the counters as read, cumulative, from one server.")  # fmt: skip
    return Window(before.read_at, after.read_at, _counts(after) - _counts(before))


def _restarted(before: Snapshot, after: Snapshot, now: list[int], then: list[int]) -> bool:
    if before.started_at is not None and after.started_at is not None:
        return after.started_at != before.started_at
    return all(a <= b for a, b in zip(now, then, strict=True)) and now != then


def _values(snapshot: Snapshot) -> list[int]:
    positions = list(snapshot.per_position) + [0] * (MAX_POSITIONS - len(snapshot.per_position))
    return [snapshot.drafts, snapshot.draft_tokens, snapshot.accepted, snapshot.requests, *positions]


def _counts(snapshot: Snapshot) -> Counts:
    return Counts(snapshot.drafts, snapshot.draft_tokens, snapshot.accepted, snapshot.per_position, snapshot.requests)


def total(windows: Sequence[Window]) -> Counts:
    return sum((w.counts for w in windows), Counts())


def acceptance_length(counts: Counts) -> float | None:
    return 1 + counts.accepted / counts.drafts if counts.drafts else None


def second_moment(per_position: Sequence[int]) -> int:
    """Σ over drafting steps of (tokens accepted)²: a step accepting j adds 1 + 3 + ... + (2j - 1) = j², position i
    (from 1) adding 2i - 1 for each step that reached it."""
    return sum((2 * i + 1) * n for i, n in enumerate(per_position))


def al_interval(counts: Counts, k: int | None = None) -> tuple[float, float] | None:
    """AL's 95 % interval, requests as the units (the module's note); None without drafts or requests."""
    return interval(counts.drafts, counts.accepted, counts.squares, counts.requests, k)


def interval(drafts: int, accepted: int, second: int | None, requests: int, k: int | None = None) -> tuple[float, float] | None:
    """AL's 95 % interval from sums: drafting steps, tokens accepted, their squares (None: not counted, and the
    largest variance a count in [0, k] with this mean can have is taken), finished requests."""
    if not drafts or requests < 2:
        return None
    mean = accepted / drafts
    bound = mean * max(0.0, (k or MAX_POSITIONS) - mean)
    variance = max(0.0, second / drafts - mean * mean) if second is not None else bound
    units = min(requests, drafts)
    half = t_975(units - 1) * math.sqrt(variance / units)
    return 1 + max(0.0, mean - half), 1 + mean + half


def position_rates(counts: Counts) -> list[float]:
    """Each position's share of drafting steps that accepted it (cumulative: positions 1..i all accepted)."""
    return [n / counts.drafts for n in counts.per_position] if counts.drafts else []


def rate_interval(successes: int, trials: int) -> tuple[float, float] | None:
    """Wilson's 95 % interval for a share; steps as the units, so it is narrower than a request-level one."""
    if trials <= 0:
        return None
    z, p = 1.959964, successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Certified:
    """What the deployment claims to run, as certified: AL's interval, the k it drafted, the engine build."""

    band: tuple[float, float]
    k: int
    engine_version: str | None
    per_position: tuple[float, ...] = ()  # the certified run's cumulative rates, shown beside the live ones


def judge(counts: Counts, certified: Certified, *, k: int | None, engine_version: str | None) -> tuple[str, str]:
    """The verdict on a span of live counts against the certificate, and why."""
    if k is not None and k != certified.k:
        return MISMATCH, f"the deployment drafts k={k}; the certificate measured k={certified.k}: not the certified configuration"
    if engine_version and certified.engine_version and engine_version != certified.engine_version:
        return MISMATCH, (f"the deployment runs vLLM {engine_version}; the certificate measured {certified.engine_version}: "
                          "not the certified configuration")  # fmt: skip
    if counts.drafts < MIN_DRAFTS or counts.requests < MIN_REQUESTS:
        return TOO_SMALL, (f"{counts.drafts} drafting steps over {counts.requests} finished requests: too few to judge "
                           f"(at least {MIN_DRAFTS} and {MIN_REQUESTS})")  # fmt: skip
    interval = al_interval(counts, certified.k)
    al = acceptance_length(counts)
    assert interval is not None and al is not None  # drafts and requests are there
    low, high = interval
    shown = f"AL {al:.2f} [{low:.2f}, {high:.2f}]"
    if high < COLLAPSE_AL:
        return COLLAPSE, f"{shown} with drafts still proposed: speculation accepts almost nothing, as broken output does"
    if high < certified.band[0]:
        return BELOW, (f"{shown}, wholly below the certified [{certified.band[0]:.2f}, {certified.band[1]:.2f}]: your traffic "
                       "or your deployment differs from what was certified")  # fmt: skip
    return WITHIN, f"{shown} against the certified [{certified.band[0]:.2f}, {certified.band[1]:.2f}]"
