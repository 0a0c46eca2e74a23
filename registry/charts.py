"""Charts drawn on the server as SVG, with axes, ticks, units and interval bands.

Why server-side SVG and not a charting library: a figure then needs no script, no CDN and no
JavaScript dependency to keep up to date; it renders the same in every browser, in a page saved
to disk and in the HTML tests; and each chart carries its numbers as text (an SVG <desc> here,
and a table beside it on the page), so it reads without sight as well. The cost is drawing the
axes here, which is the little geometry below.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

# The drawing is sized for a phone's column (about 330 px), so its text stays legible there;
# the stylesheet caps how far it grows on a desktop.
WIDTH, HEIGHT = 440, 270
NICE_STEPS = (1.0, 2.0, 2.5, 5.0)
TIMES = "\N{MULTIPLICATION SIGN}"
_Map = Callable[[float], float]  # from a data value to an SVG coordinate


@dataclass(frozen=True)
class Frame:
    """The plot area inside the drawing, and the maps from data to SVG coordinates."""

    left: float
    top: float
    right: float
    bottom: float

    @property
    def width(self) -> float:
        return self.right - self.left

    @property
    def height(self) -> float:
        return self.bottom - self.top

    def y(self, value: float, top: float) -> float:
        return self.bottom - self.height * max(0.0, min(value, top)) / top

    def x(self, value: float, top: float) -> float:
        return self.left + self.width * max(0.0, min(value, top)) / top


def bars(
    values: Sequence[float],
    labels: Sequence[str],
    *,
    title: str,
    top: float = 1.0,
    y_label: str = "share of drafts accepted",
    x_label: str = "draft position",
) -> SafeString:
    """Return a bar chart of values in [0, top], one bar per label, with the y axis ticked in quarters."""
    if not values:
        return mark_safe("")
    frame = Frame(left=60, top=22, right=WIDTH - 12, bottom=HEIGHT - 52)
    slot = frame.width / len(values)
    described = ", ".join(f"{label} {value:.2f}" for label, value in zip(labels, values, strict=True))
    parts = [_head(title, f"{y_label} by {x_label}: {described}")]
    parts += _y_axis(frame, [top * i / 4 for i in range(5)], top, y_label, fmt="{:g}")
    for index, (label, value) in enumerate(zip(labels, values, strict=True)):
        parts.append(_bar(frame, index * slot, slot, value, top, label))
    parts.append(_x_title(frame, x_label))
    return _svg(parts, title, "acceptance")


def _bar(frame: Frame, offset: float, slot: float, value: float, top: float, label: str) -> SafeString:
    x, y = frame.left + offset + slot * 0.18, frame.y(value, top)
    centre = x + slot * 0.32
    return format_html(
        '<rect class="bar" x="{}" y="{}" width="{}" height="{}"><title>{}: {}</title></rect>'
        '<text class="value" x="{}" y="{}">{}</text><text class="tick-label" x="{}" y="{}">{}</text>',
        _n(x), _n(y), _n(slot * 0.64), _n(frame.bottom - y), label, f"{value:.3f}",
        _n(centre), _n(y - 5), f"{value:.2f}", _n(centre), _n(frame.bottom + 18), label,
    )  # fmt: skip


def speedup_lines(
    levels: Sequence[int],
    series: dict[str, Sequence[float]],
    *,
    title: str,
    bound: float | None,
    intervals: Sequence[Sequence[float] | None] = (),
) -> SafeString:
    """Return speedup against concurrency (log2 x), with y = 1, the acceptance bound and the interval band.

    No break-even line: the crossing of point estimates has no interval (the page states the bounds instead)."""
    if not levels:
        return mark_safe("")
    highs = [pair[1] for pair in intervals if pair]
    ticks = nice_ticks(max([*(v for values in series.values() for v in values), *highs, bound or 0.0, 1.0]))
    top = ticks[-1]
    frame = Frame(left=60, top=36, right=WIDTH - 16, bottom=HEIGHT - 52)

    def x(level: float) -> float:
        low, high = math.log2(min(levels)), math.log2(max(levels))
        if high == low:
            return frame.left + frame.width / 2
        return frame.left + frame.width * (math.log2(level) - low) / (high - low)

    parts = [_head(title, _describe(levels, series, bound))]
    parts += _y_axis(frame, ticks, top, f"speedup ({TIMES})", fmt="{:g}" + TIMES)
    parts += [_x_tick(x(level), frame, str(level)) for level in levels]
    parts.append(_x_title(frame, "concurrent requests (log scale)"))
    parts += _band(levels, intervals, x, lambda v: frame.y(v, top))
    lines, labels = _references(frame, top, bound)
    parts += lines
    for name, values in series.items():
        parts += _line(name, levels, values, x, lambda v: frame.y(v, top))
        if len(series) > 1 and values:  # several drafts: each line names itself at its last point
            parts.append(_label(x(levels[-1]) - 4, frame.y(values[-1], top) - 8, "series-label", name.rsplit("/", 1)[-1]))
    parts += [*labels, _legend(frame, has_band=bool(highs))]  # last, so they paint over the lines
    return _svg(parts, title, "speedup")


def _references(frame: Frame, top: float, bound: float | None) -> tuple[list[SafeString], list[SafeString]]:
    """Return the reference lines (no gain, the acceptance bound) and their labels."""
    even = frame.y(1.0, top)
    lines = [_hline(frame, even, "even")]
    # Below the line at the left: speedup at low concurrency is usually above 1, so that corner is free.
    labels = [_label(frame.left + 6, even + 16, "even start", f"1{TIMES}: no gain")]
    if bound is not None:
        lines.append(_hline(frame, frame.y(bound, top), "bound"))
        labels.append(_label(frame.right - 4, frame.y(bound, top) - 6, "bound", f"bound {bound:.2f}{TIMES} from acceptance"))
    return lines, labels


def _label(x: float, y: float, css: str, text: str) -> SafeString:
    return format_html('<text class="{} halo" x="{}" y="{}">{}</text>', css, _n(x), _n(y), text)


def hbars(
    values: Sequence[float | None],
    labels: Sequence[str],
    *,
    title: str,
    x_label: str,
    reference: float | None = None,
    unit: str = "",
    name: str = "workloads",
    per: str = "workload",
) -> SafeString:
    """Return horizontal bars, one per label (a None is drawn as "not measured"), with a ticked x axis."""
    if not any(value is not None for value in values):
        return mark_safe("")
    ticks = nice_ticks(max([*(v for v in values if v is not None), reference or 0.0]))
    top, row = ticks[-1], 30
    # The category names sit left of the bars; leave them room at about 9 units a character.
    left = 24 + 9 * max(len(label) for label in labels)
    frame = Frame(left=left, top=12, right=WIDTH - 48, bottom=12 + row * len(values))
    height = frame.bottom + 52
    described = ", ".join(
        f"{lab} {'not measured' if v is None else f'{v:.2f}{unit}'}" for lab, v in zip(labels, values, strict=True)
    )
    parts = [_head(title, f"{x_label} per {per}: {described}")]
    parts += [_x_grid(frame, frame.x(tick, top), f"{tick:g}{unit}") for tick in ticks]
    for index, (label, value) in enumerate(zip(labels, values, strict=True)):
        parts.append(_hbar(frame, frame.top + index * row, row, value, top, label, unit))
    if reference is not None:
        x = frame.x(reference, top)
        parts.append(
            format_html('<line class="even" x1="{0}" x2="{0}" y1="{1}" y2="{2}"></line>', _n(x), frame.top - 6, frame.bottom)
        )
    # Centred on the drawing, not the plot: the category names push the plot right, and a long title would run off.
    parts.append(_x_title(frame, x_label, centre=WIDTH / 2))
    return _svg(parts, title, name, height=height)


def by_length(rows: Sequence[Mapping[str, Any]], *, title: str = "Mean acceptance length by prompt length") -> SafeString:
    """Mean acceptance length by prompt-length bucket: one bar each, "not measured" where no prompt fell in it."""
    return hbars(
        [row["mean_acceptance_length"] for row in rows],
        [f"≤ {row['up_to']} tokens" for row in rows],
        title=title,
        x_label="mean acceptance length (tokens per step)",
        reference=1.0,
        name="acceptance-by-length",
        per="prompt length",
    )


def by_k(row: Mapping[str, Any]) -> SafeString:
    """The lowest level's predicted speedup at each k, one bar each, against 1."""
    return hbars(
        [at["predicted_speedup"] for at in row["predicted"]],
        [f"k={at['k']}" for at in row["predicted"]],
        title=f"Predicted speedup at each k, concurrency {row['concurrency']}",
        x_label=f"predicted speedup ({TIMES}), measured only at k={row['best_k']}",
        reference=1.0,
        unit=TIMES,
        name="speedup-by-k",
        per="k",
    )


def _hbar(frame: Frame, y: float, row: float, value: float | None, top: float, label: str, unit: str) -> SafeString:
    centre = y + row / 2 + 4
    if value is None:
        return format_html(
            '<text class="category" x="{}" y="{}">{}</text><text class="value start" x="{}" y="{}">not measured</text>',
            frame.left - 8, _n(centre), label, frame.left + 4, _n(centre),
        )  # fmt: skip
    end = frame.x(value, top)
    return format_html(
        '<text class="category" x="{}" y="{}">{}</text>'
        '<rect class="hbar" x="{}" y="{}" width="{}" height="{}"><title>{}: {}</title></rect>'
        '<text class="value start" x="{}" y="{}">{}</text>',
        frame.left - 8, _n(centre), label, frame.left, _n(y + row * 0.18), _n(end - frame.left), _n(row * 0.64),
        label, f"{value:.2f}{unit}", _n(end + 4), _n(centre), f"{value:.2f}",
    )  # fmt: skip


def nice_ticks(largest: float, most: int = 5) -> list[float]:
    """Return ticks from 0 to a round number at or above `largest`, at most `most` + 1 of them."""
    if largest <= 0:
        return [0.0, 1.0]
    for exponent in range(math.floor(math.log10(largest / most)), math.ceil(math.log10(largest)) + 1):
        for step in (s * 10.0**exponent for s in NICE_STEPS):
            count = math.ceil(largest / step - 1e-9)
            if count <= most:
                return [round(step * i, 10) for i in range(count + 1)]
    return [0.0, largest]


def _describe(levels: Sequence[int], series: dict[str, Sequence[float]], bound: float | None) -> str:
    lines = [
        f"{name}: " + ", ".join(f"c={c} {v:.2f}x" for c, v in zip(levels, values, strict=True)) for name, values in series.items()
    ]
    lines.append(f"bound {bound:.2f}x" if bound is not None else "no bound")
    return "; ".join(lines)


def _band(levels: Sequence[int], intervals: Sequence[Sequence[float] | None], x: _Map, y: _Map) -> list[SafeString]:
    """Return the shaded interval band, one polygon per run of levels that have an interval."""
    runs: list[list[tuple[int, Sequence[float]]]] = [[]]
    for level, interval in zip(levels, intervals, strict=False):
        if interval and len(interval) == 2:
            runs[-1].append((level, interval))
        elif runs[-1]:
            runs.append([])
    polygons = []
    for run in (r for r in runs if r):
        upper = [f"{x(level):.1f},{y(high):.1f}" for level, (_, high) in run]
        lower = [f"{x(level):.1f},{y(low):.1f}" for level, (low, _) in reversed(run)]
        polygons.append(format_html('<polygon class="band" points="{}"></polygon>', " ".join(upper + lower)))
    return polygons


def _line(name: str, levels: Sequence[int], values: Sequence[float], x: _Map, y: _Map) -> list[SafeString]:
    points = " ".join(f"{x(level):.1f},{y(value):.1f}" for level, value in zip(levels, values, strict=True))
    parts = [format_html('<polyline class="line {}" points="{}"><title>{}</title></polyline>', name, points, name)]
    for level, value in zip(levels, values, strict=True):
        parts.append(
            format_html(
                '<circle class="point" cx="{}" cy="{}" r="3.5"><title>concurrency {}: {}{}</title></circle>',
                _n(x(level)), _n(y(value)), level, f"{value:.2f}", TIMES,
            )
        )  # fmt: skip
    return parts


def _legend(frame: Frame, *, has_band: bool) -> SafeString:
    y = frame.top - 18
    band = (
        format_html(
            '<rect class="band" x="{}" y="{}" width="16" height="11"></rect>'
            '<text class="legend" x="{}" y="{}">95 % interval</text>',
            frame.left + 96, y - 9, frame.left + 118, y,
        )
        if has_band
        else ""
    )  # fmt: skip
    return format_html(
        '<g class="legend-box"><line class="line" x1="{}" x2="{}" y1="{}" y2="{}"></line>'
        '<text class="legend" x="{}" y="{}">speedup</text>{}</g>',
        frame.left, frame.left + 20, y - 4, y - 4, frame.left + 26, y, band,
    )  # fmt: skip


def _y_axis(frame: Frame, ticks: Sequence[float], top: float, label: str, *, fmt: str) -> list[SafeString]:
    parts = []
    for tick in ticks:
        y = frame.y(tick, top)
        parts.append(
            format_html(
                '<line class="grid" x1="{}" x2="{}" y1="{}" y2="{}"></line><text class="y-tick" x="{}" y="{}">{}</text>',
                frame.left, frame.right, _n(y), _n(y), frame.left - 8, _n(y + 4), fmt.format(tick),
            )
        )  # fmt: skip
    parts.append(
        format_html(
            '<line class="axis" x1="{0}" x2="{0}" y1="{1}" y2="{2}"></line>'
            '<line class="axis" x1="{0}" x2="{3}" y1="{2}" y2="{2}"></line>'
            '<text class="axis-title" transform="translate(14 {4}) rotate(-90)">{5}</text>',
            frame.left, frame.top, frame.bottom, frame.right, _n(frame.top + frame.height / 2), label,
        )
    )  # fmt: skip
    return parts


def _x_tick(x: float, frame: Frame, label: str) -> SafeString:
    return format_html(
        '<line class="tick" x1="{0}" x2="{0}" y1="{1}" y2="{2}"></line><text class="tick-label" x="{0}" y="{3}">{4}</text>',
        _n(x), frame.bottom, frame.bottom + 5, frame.bottom + 18, label,
    )  # fmt: skip


def _x_grid(frame: Frame, x: float, label: str) -> SafeString:
    return format_html(
        '<line class="grid" x1="{0}" x2="{0}" y1="{1}" y2="{2}"></line><text class="tick-label" x="{0}" y="{3}">{4}</text>',
        _n(x), frame.top - 6, frame.bottom, frame.bottom + 18, label,
    )  # fmt: skip


def _x_title(frame: Frame, label: str, *, centre: float | None = None) -> SafeString:
    x = frame.left + frame.width / 2 if centre is None else centre
    return format_html('<text class="axis-title" x="{}" y="{}">{}</text>', _n(x), frame.bottom + 40, label)


def _hline(frame: Frame, y: float, css: str) -> SafeString:
    return format_html('<line class="{}" x1="{}" x2="{}" y1="{}" y2="{}"></line>', css, frame.left, frame.right, _n(y), _n(y))


def _head(title: str, description: str) -> SafeString:
    return format_html("<title>{}</title><desc>{}</desc>", title, description)


def _svg(parts: list[SafeString], title: str, name: str, *, height: float = HEIGHT) -> SafeString:
    body = "".join(str(part) for part in parts)
    return mark_safe(  # noqa: S308 - every part above was built with format_html
        f'<svg class="chart" data-chart="{escape(name)}" role="img" aria-label="{escape(title)}" '
        f'viewBox="0 0 {WIDTH} {_n(height)}" xmlns="http://www.w3.org/2000/svg">{body}</svg>'
    )


def _n(value: float) -> str:
    return f"{value:.1f}"


def live_acceptance(points: Sequence[Mapping[str, Any]], band: Sequence[float] | None) -> SafeString:
    """Live AL over time, each stretch with its interval, against the certified band (shaded) and the collapse line."""
    measured = [p for p in points if p["al"] is not None]
    if not measured:
        return mark_safe("")
    title = "Live acceptance length against the certified band"
    highs = [p["interval"][1] for p in measured if p["interval"]]
    ticks = nice_ticks(max([*(p["al"] for p in measured), *highs, *(band or ()), 2.0]))
    top = ticks[-1]
    frame = Frame(left=60, top=36, right=WIDTH - 16, bottom=HEIGHT - 52)
    first, last = measured[0]["end"].timestamp(), measured[-1]["end"].timestamp()

    def x(point: Mapping[str, Any]) -> float:
        span = last - first
        return frame.left + frame.width / 2 if span <= 0 else frame.left + frame.width * (point["end"].timestamp() - first) / span

    parts = [_head(title, "; ".join(f"{p['end']:%Y-%m-%d %H:%M} AL {p['al']:.2f} ({p['verdict']})" for p in measured))]
    parts += _y_axis(frame, ticks, top, "acceptance length", fmt="{:g}")
    if band:
        low, high = frame.y(band[1], top), frame.y(band[0], top)
        parts.append(
            format_html(
                '<rect class="band certified" x="{}" y="{}" width="{}" height="{}"><title>certified {} to {}</title></rect>',
                frame.left, _n(low), _n(frame.width), _n(max(1.0, high - low)), f"{band[0]:.2f}", f"{band[1]:.2f}",
            )
        )  # fmt: skip
    parts.append(_hline(frame, frame.y(1.2, top), "collapse"))
    for point in measured:
        if point["interval"]:
            parts.append(format_html('<line class="whisker" x1="{0}" x2="{0}" y1="{1}" y2="{2}"></line>', _n(x(point)),
                                     _n(frame.y(point["interval"][1], top)), _n(frame.y(point["interval"][0], top))))  # fmt: skip
    line = " ".join(f"{x(p):.1f},{frame.y(p['al'], top):.1f}" for p in measured)
    parts.append(format_html('<polyline class="line speedup" points="{}"></polyline>', line))
    for point in measured:
        parts.append(format_html('<circle class="point verdict-{}" cx="{}" cy="{}" r="3"><title>{}: AL {} ({})</title></circle>',
                                 point["verdict"].replace(" ", "-"), _n(x(point)), _n(frame.y(point["al"], top)),
                                 f"{point['end']:%Y-%m-%d %H:%M}", f"{point['al']:.2f}", point["verdict"]))  # fmt: skip
    parts.append(_x_tick(frame.left, frame, f"{measured[0]['end']:%m-%d %H:%M}"))
    parts.append(format_html('<text class="tick-label end" x="{}" y="{}">{}</text>', frame.right,
                             frame.bottom + 18, f"{measured[-1]['end']:%m-%d %H:%M}"))  # fmt: skip
    parts.append(_x_title(frame, "time (UTC)"))
    return _svg(parts, title, "live-acceptance")
