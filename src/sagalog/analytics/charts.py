"""Inline SVG charts for the HTML report, drawn here: no JavaScript, no external assets.

Each function takes plain rows and returns one ``<svg>`` element sized by its
``viewBox``, so it scales with the page and prints sharply. Durations use a log scale:
a flow's states range from seconds (a model call) to days (a manager's approval),
and on a linear scale only the longest would be visible; every bar is labelled with
its value, so nothing has to be read off the axis.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from sagalog.analytics.tables import human_duration

WIDTH = 760
INK = "#0f172a"
MUTED = "#64748b"
GRID = "#e2e8f0"
P50 = "#1d4ed8"
P95 = "#bfdbfe"
STARTED = "#0284c7"
COMPLETED = "#16a34a"
OTHER_END = "#f59e0b"
FONT = 'font-family="Inter, Segoe UI, Helvetica, Arial, sans-serif"'

STATE_COLOURS = {
    "completed": "#16a34a",
    "compensated": "#f59e0b",
    "failed": "#dc2626",
    "timed_out": "#7c3aed",
}
"""Terminal states' colours; any other state is drawn in slate."""

_DURATION_TICKS = (
    (1, "1ms"),
    (10, "10ms"),
    (100, "100ms"),
    (1_000, "1s"),
    (10_000, "10s"),
    (60_000, "1m"),
    (600_000, "10m"),
    (3_600_000, "1h"),
    (21_600_000, "6h"),
    (86_400_000, "1d"),
    (604_800_000, "1w"),
    (2_592_000_000, "30d"),
    (31_536_000_000, "1y"),
)


@dataclass(frozen=True, slots=True)
class DwellBar:
    """One bar of a dwell chart: ``label`` (state or step), its p50, p95 and sample count."""

    label: str
    p50_ms: int
    p95_ms: int
    count: int
    note: str = ""


@dataclass(frozen=True, slots=True)
class ThroughputBucket:
    """Workflows started and ended (of which completed) from ``start_ms`` on."""

    start_ms: int
    started: int
    ended: int
    completed: int


def dwell_chart(bars: Sequence[DwellBar], *, caption: str) -> str:
    """Horizontal bars on a log scale: p95 (light) behind p50 (dark), values labelled."""
    if not bars:
        return _empty(caption)
    left, right, row, top = 200, 560, 34, 34
    height = top + row * len(bars) + 34
    positive = [v for b in bars for v in (b.p50_ms, b.p95_ms) if v > 0] or [1_000]
    ticks = _duration_ticks(min(positive), max(positive))
    low, high = math.log10(ticks[0][0]), math.log10(ticks[-1][0])

    def x(ms: int) -> float:
        if ms <= 0:
            return left
        return left + (right - left) * (math.log10(ms) - low) / (high - low)

    out = [_open(height, caption)]
    for value, text in ticks:
        at = x(value)
        out.append(_line(at, top - 8, at, top + row * len(bars), GRID))
        out.append(_text(at, top - 14, text, size=11, fill=MUTED, anchor="middle"))
    for i, bar in enumerate(bars):
        y = top + i * row
        out.append(_text(left - 10, y + row / 2 + 4, bar.label, size=13, anchor="end"))
        if bar.note:
            out.append(
                _text(left - 10, y + row / 2 + 16, bar.note, size=10, fill=MUTED, anchor="end")
            )
        out.append(_rect(left, y + 6, max(1.5, x(bar.p95_ms) - left), row - 12, P95, radius=3))
        out.append(_rect(left, y + 11, max(1.5, x(bar.p50_ms) - left), row - 22, P50, radius=2))
        out.append(
            _text(
                right + 12,
                y + row / 2 + 4,
                f"p50 {human_duration(bar.p50_ms)} · p95 {human_duration(bar.p95_ms)}",
                size=12,
            )
        )
        out.append(_text(right + 12, y + row / 2 + 17, f"n = {bar.count:,}", size=10, fill=MUTED))
    legend_y = height - 12
    out.append(_rect(left, legend_y - 9, 14, 10, P50, radius=2))
    out.append(_text(left + 20, legend_y, "median (p50)", size=11, fill=MUTED))
    out.append(_rect(left + 120, legend_y - 9, 14, 10, P95, radius=2))
    out.append(
        _text(left + 140, legend_y, "95th percentile (p95) · log scale", size=11, fill=MUTED)
    )
    out.append("</svg>")
    return "\n".join(out)


def throughput_chart(buckets: Sequence[ThroughputBucket], *, caption: str, unit: str) -> str:
    """Started (blue) next to ended (green completed, amber otherwise) per time bucket."""
    if not buckets:
        return _empty(caption)
    left, right, top, bottom = 48, WIDTH - 16, 14, 208
    height = bottom + 46
    peak = max(max(b.started, b.ended) for b in buckets) or 1
    step, ceiling = _nice_axis(peak)

    def y(value: float) -> float:
        return bottom - (bottom - top) * value / ceiling

    out = [_open(height, caption)]
    for value in range(0, ceiling + 1, step):
        out.append(_line(left, y(value), right, y(value), GRID))
        out.append(_text(left - 6, y(value) + 4, f"{value:,}", size=11, fill=MUTED, anchor="end"))
    slot = (right - left) / len(buckets)
    bar = max(1.0, min(14.0, slot * 0.36))
    every = max(1, math.ceil(len(buckets) / 10))
    for i, b in enumerate(buckets):
        centre = left + slot * (i + 0.5)
        if b.started:
            out.append(_rect(centre - bar - 0.5, y(b.started), bar, bottom - y(b.started), STARTED))
        if b.completed:
            out.append(_rect(centre + 0.5, y(b.completed), bar, bottom - y(b.completed), COMPLETED))
        if b.ended > b.completed:
            out.append(_rect(centre + 0.5, y(b.ended), bar, y(b.completed) - y(b.ended), OTHER_END))
        if i % every == 0:
            out.append(_line(centre, bottom, centre, bottom + 4, MUTED))
            out.append(
                _text(
                    centre,
                    bottom + 17,
                    _bucket_label(b.start_ms, unit),
                    size=10,
                    fill=MUTED,
                    anchor="middle",
                )
            )
    out.append(_line(left, bottom, right, bottom, MUTED))
    legend_y = height - 8
    for offset, colour, text in (
        (0, STARTED, "started"),
        (90, COMPLETED, "ended: completed"),
        (235, OTHER_END, "ended: failed, compensated or timed out"),
    ):
        out.append(_rect(left + offset, legend_y - 9, 12, 10, colour, radius=2))
        out.append(_text(left + offset + 17, legend_y, text, size=11, fill=MUTED))
    out.append(_text(right, legend_y, f"per {unit} (UTC)", size=11, fill=MUTED, anchor="end"))
    out.append("</svg>")
    return "\n".join(out)


def terminal_chart(counts: Sequence[tuple[str, int]], *, caption: str) -> str:
    """One 100% bar split by terminal state, with each part's count and share below."""
    total = sum(count for _, count in counts)
    if not total:
        return _empty(caption)
    left, right, top = 16, WIDTH - 16, 12
    legend_rows = math.ceil(len(counts) / 3)
    height = top + 40 + 14 + legend_rows * 24
    out = [_open(height, caption)]
    x = float(left)
    for state, count in counts:
        width = (right - left) * count / total
        colour = STATE_COLOURS.get(state, "#64748b")
        out.append(_rect(x, top, width, 40, colour))
        share = count / total
        if width > 46:
            out.append(
                _text(
                    x + width / 2,
                    top + 25,
                    f"{share * 100:.0f}%",
                    size=13,
                    fill="#ffffff",
                    anchor="middle",
                    bold=True,
                )
            )
        x += width
    for i, (state, count) in enumerate(counts):
        col, line = i % 3, i // 3
        lx, ly = left + col * 250, top + 40 + 30 + line * 24
        out.append(_rect(lx, ly - 10, 12, 12, STATE_COLOURS.get(state, "#64748b"), radius=2))
        out.append(_text(lx + 18, ly, f"{state}  {count:,} ({count / total * 100:.1f}%)", size=12))
    out.append("</svg>")
    return "\n".join(out)


def bucket_hours(
    hours: Sequence[ThroughputBucket], *, max_buckets: int = 72
) -> tuple[list[ThroughputBucket], str]:
    """Buckets to draw from hourly rows, and their unit (``hour``, ``day``, ``week``).

    The smallest unit whose span from the first to the last busy bucket fits in
    ``max_buckets``, quiet buckets filled with zeros; when not even weeks fit (stray
    far-off timestamps, such as a virtual clock that started at zero), the busy weeks
    alone, and the unit ``busy week``.
    """
    for unit, size in (("hour", 3_600_000), ("day", 86_400_000), ("week", 604_800_000)):
        sums: dict[int, list[int]] = {}
        for h in hours:
            start = h.start_ms - h.start_ms % size
            row = sums.setdefault(start, [0, 0, 0])
            row[0] += h.started
            row[1] += h.ended
            row[2] += h.completed
        if not sums:
            return [], unit
        first, last = min(sums), max(sums)
        if (last - first) // size < max_buckets:
            return [
                ThroughputBucket(s, *sums.get(s, [0, 0, 0]))
                for s in range(first, last + size, size)
            ], unit
    return [ThroughputBucket(s, *sums[s]) for s in sorted(sums)], "busy week"


def _duration_ticks(low: int, high: int) -> list[tuple[int, str]]:
    below = [t for t in _DURATION_TICKS if t[0] <= low] or [_DURATION_TICKS[0]]
    above = [t for t in _DURATION_TICKS if t[0] >= high] or [_DURATION_TICKS[-1]]
    start, end = _DURATION_TICKS.index(below[-1]), _DURATION_TICKS.index(above[0])
    while end - start < 3:  # at least four ticks, so the scale reads as one
        if start > 0:
            start -= 1
        else:
            end += 1
    return list(_DURATION_TICKS[start : end + 1])


def _nice_axis(peak: int) -> tuple[int, int]:
    """A round tick step and the axis top (a multiple of it) at or above ``peak``."""
    raw = peak / 4
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    step = max(1, int(step))
    return step, step * math.ceil(peak / step)


def _bucket_label(start_ms: int, unit: str) -> str:
    moment = dt.datetime.fromtimestamp(start_ms / 1000, dt.UTC)
    if unit == "hour":
        return moment.strftime("%d %b %Hh")
    if unit == "day":
        return moment.strftime("%d %b")
    return moment.strftime("%d %b %Y")


def _open(height: int, caption: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="100%" role="img" aria-label="{escape(caption)}" {FONT}>'
        f"<title>{escape(caption)}</title>"
    )


def _empty(caption: str) -> str:
    return (
        _open(60, caption)
        + _text(
            WIDTH / 2, 34, "nothing to draw in this range", size=13, fill=MUTED, anchor="middle"
        )
        + "</svg>"
    )


def _rect(x: float, y: float, w: float, h: float, fill: str, *, radius: float = 0) -> str:
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(0.0, w):.1f}" height="{max(0.0, h):.1f}" '
        f'rx="{radius}" fill="{fill}"/>'
    )


def _line(x1: float, y1: float, x2: float, y2: float, stroke: str) -> str:
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
        f'stroke="{stroke}" stroke-width="1"/>'
    )


def _text(
    x: float,
    y: float,
    text: str,
    *,
    size: int,
    fill: str = INK,
    anchor: str = "start",
    bold: bool = False,
) -> str:
    weight = ' font-weight="600"' if bold else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{fill}" '
        f'text-anchor="{anchor}"{weight}>{escape(text)}</text>'
    )
