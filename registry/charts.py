"""Charts drawn on the server as SVG: no script, no CDN, and each one carries a text description.

The pages put a table with the same numbers next to every chart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT, PAD = 420, 220, 36


def bars(values: Sequence[float], labels: Sequence[str], *, title: str, top: float = 1.0) -> SafeString:
    """Return a bar chart of values in [0, top], one bar per label."""
    if not values:
        return mark_safe("")
    slot = (WIDTH - 2 * PAD) / len(values)
    parts = [_axes(title, f"bars: {', '.join(f'{lab} {val:.2f}' for lab, val in zip(labels, values, strict=True))}")]
    for index, (label, value) in enumerate(zip(labels, values, strict=True)):
        height = (HEIGHT - 2 * PAD) * max(0.0, min(value, top)) / top
        x = PAD + index * slot + slot * 0.15
        parts.append(
            format_html(
                '<rect class="bar" x="{}" y="{}" width="{}" height="{}"><title>{}: {}</title></rect>'
                '<text x="{}" y="{}" text-anchor="middle">{}</text>',
                _n(x), _n(HEIGHT - PAD - height), _n(slot * 0.7), _n(height), label, f"{value:.3f}", _n(x + slot * 0.35),
                HEIGHT - PAD + 14, label,
            )
        )  # fmt: skip
    return _svg(parts, title)


def speedup_lines(
    levels: Sequence[int], series: dict[str, Sequence[float]], *, title: str, bound: float | None, break_even: float | None
) -> SafeString:
    """Return speedup against concurrency (log x), with y = 1, the acceptance bound and the break-even marked."""
    if not levels:
        return mark_safe("")
    top = max([*(v for values in series.values() for v in values), bound or 0, 1.0]) * 1.1

    def x(level: float) -> float:
        span = math.log(max(levels)) - math.log(min(levels)) or 1.0
        return PAD + (WIDTH - 2 * PAD) * (math.log(level) - math.log(min(levels))) / span

    def y(value: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / top

    parts = [_axes(title, _describe(levels, series, bound, break_even))]
    parts.append(_hline(y(1.0), "even", "1.0x (no gain)"))
    if bound is not None:
        parts.append(_hline(y(bound), "bound", f"bound {bound:.2f}x (acceptance length)"))
    for name, values in series.items():
        points = " ".join(f"{x(level):.1f},{y(value):.1f}" for level, value in zip(levels, values, strict=True))
        parts.append(format_html('<polyline class="line {}" points="{}"><title>{}</title></polyline>', name, points, name))
    for level in levels:
        parts.append(format_html('<text x="{}" y="{}" text-anchor="middle">{}</text>', _n(x(level)), HEIGHT - PAD + 14, level))
    if break_even is not None:
        parts.append(
            format_html(
                '<line class="break-even" x1="{0}" x2="{0}" y1="{1}" y2="{2}"><title>break-even at {3}</title></line>',
                _n(x(break_even)), PAD, HEIGHT - PAD, _n(break_even),
            )
        )  # fmt: skip
    return _svg(parts, title)


def _describe(levels: Sequence[int], series: dict[str, Sequence[float]], bound: float | None, break_even: float | None) -> str:
    lines = [
        f"{name}: " + ", ".join(f"c={c} {v:.2f}x" for c, v in zip(levels, values, strict=True)) for name, values in series.items()
    ]
    lines.append(f"bound {bound:.2f}x" if bound is not None else "no bound")
    lines.append(f"break-even at concurrency {break_even:.1f}" if break_even is not None else "no break-even in range")
    return "; ".join(lines)


def _hline(y: float, css: str, label: str) -> SafeString:
    return format_html(
        '<line class="{}" x1="{}" x2="{}" y1="{}" y2="{}"></line><text class="{}" x="{}" y="{}">{}</text>',
        css, PAD, WIDTH - PAD, _n(y), _n(y), css, WIDTH - PAD - 4, _n(y - 4), label,
    )  # fmt: skip


def _axes(title: str, description: str) -> SafeString:
    return format_html(
        '<title>{}</title><desc>{}</desc><line class="axis" x1="{}" x2="{}" y1="{}" y2="{}"></line>',
        title, description, PAD, WIDTH - PAD, HEIGHT - PAD, HEIGHT - PAD,
    )  # fmt: skip


def _svg(parts: list[SafeString], title: str) -> SafeString:
    body = "".join(str(part) for part in parts)
    return mark_safe(  # noqa: S308 - every part above was built with format_html
        f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'xmlns="http://www.w3.org/2000/svg">{body}</svg>'
    )


def _n(value: float) -> str:
    return f"{value:.1f}"
