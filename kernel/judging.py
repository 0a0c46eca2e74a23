"""One run of someone's own (a vllm bench serve result, a saved /metrics) held to the certified band: within, below or
above, for AL and for each position's rate, with the smallest difference the comparison can see.

AL's interval is kernel.live's: finished requests as the units, discounted for the spread of their lengths, so a
file of a few requests reads wide, not falsely precise. A position's rate gets Wilson's interval over the same
effective requests. "Below" means the run's whole interval lies under the certified band; "above", over it; any
overlap is "within". The difference the comparison can see is the two half-widths together: a run whose true AL
sits nearer the certified one than that reads "within" whatever it is. Pure: no I/O, no Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from kernel import live, stats
from kernel.vllm_results import Observed

ABOVE = "above"
VERDICTS = (live.WITHIN, live.BELOW, ABOVE, live.TOO_SMALL, live.MISMATCH, live.NO_BAND)


@dataclass(frozen=True)
class Band:
    """What the certified run measured at the pair's k and the file's temperature."""

    al: float | None
    interval: tuple[float, float] | None  # None: the run gave no interval over its prompts
    per_position: tuple[float, ...] = ()
    per_position_interval: tuple[tuple[float, float] | None, ...] = ()
    k: int = 0


class PositionAnswer(TypedDict):
    position: int
    rate: float
    interval: list[float]
    certified: float | None
    certified_interval: list[float]
    verdict: str
    smallest_difference: float | None


class Judgement(TypedDict):
    verdict: str
    reason: str
    al: float | None
    al_interval: list[float]
    certified_al: float | None
    band: list[float]
    smallest_difference: float | None  # in AL (tokens a step): the least gap from the certified AL that can show
    drafts: int
    requests: int
    k: int | None
    source: str
    note: str
    positions: list[PositionAnswer]


def judge(observed: Observed, band: Band) -> Judgement:
    """The file's AL and per-position rates against the band, and why."""
    counts = observed.counts
    al, interval = live.acceptance_length(counts), live.al_interval(counts, band.k or None)
    verdict, reason, smallest = _verdict(observed, band, al, interval)
    return {
        "verdict": verdict, "reason": reason, "al": al, "al_interval": list(interval) if interval else [],
        "certified_al": band.al, "band": list(band.interval) if band.interval else [], "smallest_difference": smallest,
        "drafts": counts.drafts, "requests": counts.requests, "k": observed.k, "source": observed.source,
        "note": observed.note, "positions": positions(counts, band) if verdict != live.MISMATCH else [],
    }  # fmt: skip


def _verdict(
    observed: Observed, band: Band, al: float | None, interval: tuple[float, float] | None
) -> tuple[str, str, float | None]:
    counts = observed.counts
    if observed.k is not None and band.k and observed.k != band.k:
        return live.MISMATCH, (f"the file counts {observed.k} draft positions; the certificate measured k={band.k}: "
                               "not the certified configuration"), None  # fmt: skip
    if counts.drafts < live.MIN_DRAFTS or counts.requests < live.MIN_REQUESTS or interval is None or al is None:
        return live.TOO_SMALL, (f"{counts.drafts} drafting steps over {counts.requests} finished requests: too few to "
                                f"judge (at least {live.MIN_DRAFTS} and {live.MIN_REQUESTS})"), None  # fmt: skip
    shown = f"AL {al:.2f} [{interval[0]:.2f}, {interval[1]:.2f}] over {counts.requests} requests"
    if band.interval is None:
        measured = f"AL {band.al:.2f}" if band.al is not None else "an AL"
        return live.NO_BAND, f"{live.NO_BAND_REASON} (the certified run measured {measured}, with no interval; {shown})", None
    low, high = band.interval
    smallest = (interval[1] - interval[0]) / 2 + (high - low) / 2
    seen = _seen(smallest, band.al if band.al is not None else (low + high) / 2)
    against = f"the certified [{low:.2f}, {high:.2f}]"
    if interval[1] < low:
        return live.BELOW, f"{shown}, wholly below {against}: your traffic or your server differs; {seen}", smallest
    if interval[0] > high:
        return ABOVE, f"{shown}, wholly above {against}: your traffic is easier to draft for; {seen}", smallest
    return live.WITHIN, f"{shown}, overlapping {against}; {seen}", smallest


def _seen(smallest: float, centre: float) -> str:
    share = f" ({smallest / centre * 100:.0f} %)" if centre > 0 else ""
    return f"a difference from the certified AL under {smallest:.2f}{share} cannot show with this many requests"


def positions(counts: live.Counts, band: Band) -> list[PositionAnswer]:
    """Each position's rate, its interval over the effective requests, beside the certified one: judged as AL is,
    too small where AL is, and with no band where the certified run gave that position no interval."""
    units = min(counts.requests, counts.drafts) / live.LENGTH_SPREAD
    judgeable = counts.drafts >= live.MIN_DRAFTS and counts.requests >= live.MIN_REQUESTS
    rows: list[PositionAnswer] = []
    for index, rate in enumerate(live.position_rates(counts)):
        interval = wilson(rate, units)
        held = band.per_position[index] if index < len(band.per_position) else None
        given = band.per_position_interval[index] if index < len(band.per_position_interval) else None
        verdict, smallest = _position_verdict(interval if judgeable else None, given)
        rows.append({"position": index + 1, "rate": rate, "interval": list(interval) if interval else [],
                     "certified": held, "certified_interval": list(given) if given else [], "verdict": verdict,
                     "smallest_difference": smallest})  # fmt: skip
    return rows


def _position_verdict(interval: tuple[float, float] | None, certified: tuple[float, float] | None) -> tuple[str, float | None]:
    if interval is None:
        return live.TOO_SMALL, None
    if certified is None:
        return live.NO_BAND, None
    smallest = (interval[1] - interval[0]) / 2 + (certified[1] - certified[0]) / 2
    if interval[1] < certified[0]:
        return live.BELOW, smallest
    if interval[0] > certified[1]:
        return ABOVE, smallest
    return live.WITHIN, smallest


def wilson(rate: float, units: float) -> tuple[float, float] | None:
    """Wilson's 95 % interval (kernel.stats) over `units` effective requests; None under two."""
    return None if units < 2 else stats.wilson(rate, units)


def band_of(
    al: float | None,
    interval: Sequence[float] | None,
    per_position: Sequence[float],
    per_position_interval: Sequence[Sequence[float]],
    k: int,
) -> Band:
    """A Band from the result document's figures (lists as stored; an empty interval is none)."""
    spans = tuple((float(i[0]), float(i[1])) if len(i) == 2 else None for i in per_position_interval)
    return Band(al, (float(interval[0]), float(interval[1])) if interval and len(interval) == 2 else None,
                tuple(per_position), spans, k)  # fmt: skip
