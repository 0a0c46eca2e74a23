"""Live acceptance: a running deployment's spec-decode counters, as its watcher read them, held to its certificate.

The watcher pushes cumulative counters with the time it read them (a snapshot); SpecHub takes the window between
two consecutive snapshots, so a lost push loses nothing: the next window spans it. A server restart starts the
counters over; it is told by the server's own start time (`process_start_time_seconds`) or, where that is not
exposed, by every counter falling at once. The window after it holds what the new process counted.

AL in a window is 1 + accepted/drafts. Its interval treats each finished request, not each drafting step, as the
independent unit: a request's steps share its prompt and accept alike, so steps alone would give an interval far
narrower than the truth (tests/kernel/test_live.py simulates it). With only counts, the variance of a step's
accepted tokens comes exactly from the per-position counts (P(X >= i) is position i's share), and dividing it by
the requests, as if every step of a request accepted the same, bounds the variance of the mean from above, but only
for requests of one length: AL is a ratio, each request weighing by its steps, and the ratio's variance over requests
grows with Σ steps² / (Σ steps)², which the counters do not tell. So the requests are discounted by LENGTH_SPREAD,
the 1 + CV² of lognormal output lengths with sigma 1 (chat traffic's spread), and the t takes those few units.

"Below" is held to a false alarm in at most FAMILY_ALPHA of deployments over FAMILY_WINDOWS windows: the window's
one-sided bound at 1 - FAMILY_ALPHA / FAMILY_WINDOWS (Bonferroni) lies wholly under the certified band, and so did the
window before. The level holds where the lengths spread no wider than LENGTH_SPREAD allows; past it, a window that
one very long request dominates can read low alone, but such windows come apart, so two in a row are rare
(tests/kernel/test_live_family.py simulates both). A certified run without an interval gives no band, and a point is
no band: "no band", never "below", against it.

Pure: no Django; the registry stores snapshots and judges through these functions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from kernel import stats
from kernel.stats import t_975, t_quantile

MIN_DRAFTS = 200  # drafting steps below which a window is too small to judge
MIN_REQUESTS = 8  # finished requests, likewise: the interval's units
COLLAPSE_AL = 1.2  # an interval wholly below this, with drafts still proposed, is what broken output looks like
MAX_POSITIONS = 64  # no engine drafts more tokens a step
MAX_COUNT = 2**62  # what a 64-bit counter column holds, with room to sum windows
EARLIEST, LATEST = 1e9, 1e10  # read_at in seconds since the epoch: 2001 to 2286
MAX_CLOCK_AHEAD = 300.0  # seconds a watcher's clock may run ahead of the server's; one far ahead would block every push
# 1 + CV² of the requests' drafting steps: e^(sigma²) for lognormal output lengths with sigma 1 (chat traffic's spread).
LENGTH_SPREAD = math.e
FAMILY_ALPHA, FAMILY_WINDOWS = 0.05, 30  # at most 5 % of matching deployments read "below" once in 30 windows

WITHIN, BELOW, COLLAPSE, TOO_SMALL, MISMATCH = "within", "below", "collapse", "too small", "mismatch"
NO_BAND = "no band"  # the certified run has no interval: a point, against which any window would read below
VERDICTS = (WITHIN, BELOW, COLLAPSE, TOO_SMALL, MISMATCH, NO_BAND)
NO_BAND_REASON = "no band: re-certify to hold it live"


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
    spread = _spread(drafts, accepted, second, requests, k)
    if spread is None:
        return None
    mean, error, dof = spread
    half = t_975(dof) * error
    return 1 + max(0.0, mean - half), 1 + mean + half


def al_bound(counts: Counts, k: int | None = None) -> float | None:
    """AL's one-sided upper bound at 1 - FAMILY_ALPHA / FAMILY_WINDOWS: under the band in at most FAMILY_ALPHA of
    FAMILY_WINDOWS windows of a deployment that runs as certified."""
    spread = _spread(counts.drafts, counts.accepted, counts.squares, counts.requests, k)
    if spread is None:
        return None
    mean, error, dof = spread
    return 1 + mean + _t(1 - FAMILY_ALPHA / FAMILY_WINDOWS, dof) * error


def _spread(drafts: int, accepted: int, second: int | None, requests: int, k: int | None) -> tuple[float, float, int] | None:
    """Tokens accepted a step, its standard error and the t's degrees of freedom, over the effective requests."""
    if not drafts or requests < 2:
        return None
    mean = accepted / drafts
    bound = mean * max(0.0, (k or MAX_POSITIONS) - mean)
    variance = max(0.0, second / drafts - mean * mean) if second is not None else bound
    units = min(requests, drafts) / LENGTH_SPREAD
    return mean, math.sqrt(variance / units), max(1, math.floor(units) - 1)


@functools.lru_cache(maxsize=1024)
def _t(p: float, dof: int) -> float:
    return t_quantile(p, dof)


def position_rates(counts: Counts) -> list[float]:
    """Each position's share of drafting steps that accepted it (cumulative: positions 1..i all accepted)."""
    return [n / counts.drafts for n in counts.per_position] if counts.drafts else []


def rate_interval(successes: int, trials: int) -> tuple[float, float] | None:
    """Wilson's 95 % interval for a share; steps as the units, so it is narrower than a request-level one."""
    return stats.wilson(successes / trials, trials) if trials > 0 else None


@dataclass(frozen=True)
class Certified:
    """What the deployment claims to run, as certified: AL's interval (None where the run gave none), the k it
    drafted, the engine build."""

    band: tuple[float, float] | None
    k: int
    engine_version: str | None
    per_position: tuple[float, ...] = ()  # the certified run's cumulative rates, shown beside the live ones
    al: float | None = None  # the certified AL, what a drop is measured from (the band's middle where not given)

    @property
    def centre(self) -> float | None:
        if self.al is not None:
            return self.al
        return (self.band[0] + self.band[1]) / 2 if self.band else None


def judge(
    counts: Counts, certified: Certified, *, k: int | None, engine_version: str | None, before: Counts | None = None
) -> tuple[str, str]:
    """The verdict on a span of live counts against the certificate, and why; `before`, the span before it, must
    read under the band too for "below"."""
    mismatch = _mismatch(certified, k, engine_version)
    if mismatch:
        return MISMATCH, mismatch
    if counts.drafts < MIN_DRAFTS or counts.requests < MIN_REQUESTS:
        return TOO_SMALL, (f"{counts.drafts} drafting steps over {counts.requests} finished requests: too few to judge "
                           f"(at least {MIN_DRAFTS} and {MIN_REQUESTS})")  # fmt: skip
    interval, bound = al_interval(counts, certified.k), al_bound(counts, certified.k)
    al = acceptance_length(counts)
    assert interval is not None and bound is not None and al is not None  # drafts and requests are there
    shown = f"AL {al:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"
    if interval[1] < COLLAPSE_AL:
        return COLLAPSE, f"{shown} with drafts still proposed: speculation accepts almost nothing, as broken output does"
    if certified.band is None:
        measured = f"AL {certified.al:.2f}" if certified.al is not None else "an AL"
        return NO_BAND, f"{NO_BAND_REASON} (the certified run measured {measured}, with no interval over its prompts; {shown})"
    return _against_band(counts, certified, shown, bound, before)


def _against_band(counts: Counts, certified: Certified, shown: str, bound: float, before: Counts | None) -> tuple[str, str]:
    assert certified.band is not None
    band = f"[{certified.band[0]:.2f}, {certified.band[1]:.2f}]"
    if bound >= certified.band[0]:
        return WITHIN, f"{shown} against the certified {band}; {unseen_drop_text(unseen_drop(counts, certified))}"
    under = f"{shown}, at most {bound:.2f} (one-sided, {FAMILY_ALPHA:g} over {FAMILY_WINDOWS} windows)"
    if before is None or not reads_under(before, certified):
        return WITHIN, (f"{under}, under the certified {band} in this window alone: it reads below when the next "
                        "window agrees (one very long request can sway a window)")  # fmt: skip
    return BELOW, (f"{under}, wholly below the certified {band} in this window and the one before: your traffic or "
                   "your deployment differs from what was certified")  # fmt: skip


def reads_under(counts: Counts, certified: Certified) -> bool:
    """True where the span is judgeable and its bound lies wholly under the certified band."""
    if certified.band is None or counts.drafts < MIN_DRAFTS or counts.requests < MIN_REQUESTS:
        return False
    bound = al_bound(counts, certified.k)
    return bound is not None and bound < certified.band[0]


def _mismatch(certified: Certified, k: int | None, engine_version: str | None) -> str:
    if k is not None and k != certified.k:
        return f"the deployment drafts k={k}; the certificate measured k={certified.k}: not the certified configuration"
    if engine_version and certified.engine_version and engine_version != certified.engine_version:
        return (f"the deployment runs vLLM {engine_version}; the certificate measured {certified.engine_version}: "
                "not the certified configuration")  # fmt: skip
    return ""


def unseen_drop(counts: Counts, certified: Certified) -> float | None:
    """The relative fall of the true AL from the certified one that this traffic could hide: above it, the window's
    bound would lie under the band. 1 where even AL 1 would not read under; None where there is no band or bound.

    The bound's reach above AL is taken at the fallen AL: a step's tokens accepted vary about as much as their mean,
    so the reach scales with the square root of AL - 1 (simulated, within a few points of the drop that reads under
    half the time)."""
    bound, al, centre = al_bound(counts, certified.k), acceptance_length(counts), certified.centre
    if certified.band is None or bound is None or al is None or centre is None:
        return None
    reach = (bound - al) / math.sqrt(al - 1) if al > 1 else bound - 1
    # The highest AL T whose bound clears the band: T + reach * sqrt(T - 1) = the band's low end, solved for sqrt(T - 1).
    root = (math.sqrt(reach * reach + 4 * max(0.0, certified.band[0] - 1)) - reach) / 2
    highest = 1 + root * root
    return min(1.0, max(0.0, 1 - highest / centre)) if root > 0 else 1.0


def unseen_drop_text(drop: float | None) -> str:
    if drop is None:
        return "no band to measure a drop against"
    if drop >= 1:
        return "at this traffic no drop would show"
    return f"a drop under {drop * 100:.0f} % would not show at this traffic"
