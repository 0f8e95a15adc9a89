"""Latency against load as a small self-contained SVG (no plotting dependency).

x: offered load in sagas/s (the 25%, 50% and 80% runs); y: milliseconds on a log
scale, since p50 and p99.9 differ by orders of magnitude. One line per percentile of
the agents' handoff, dashed lines for end to end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from typing import Any

WIDTH, HEIGHT = 760, 460
LEFT, RIGHT, TOP, BOTTOM = 70, 200, 50, 60
SERIES = (  # key in a latency_by_load entry, label, colour, dashed
    ("handoff_p50_ms", "handoff p50", "#1b9e77", False),
    ("handoff_p99_ms", "handoff p99", "#d95f02", False),
    ("handoff_p999_ms", "handoff p99.9", "#7570b3", False),
    ("tracker_handoff_p99_ms", "tracker handoff p99", "#e7298a", False),
    ("e2e_p50_ms", "end to end p50", "#66a61e", True),
    ("e2e_p99_ms", "end to end p99", "#a6761d", True),
)


def latency_plot(by_load: Mapping[str, Mapping[str, Any]], results: Mapping[str, Any]) -> str:
    """The SVG text for ``latency_by_load`` (``results`` supplies the title's figures)."""
    points = sorted(
        (float(entry["arrivals_per_s"]), entry)
        for entry in by_load.values()
        if entry.get("arrivals_per_s")
    )
    values = [
        float(entry[key])
        for _, entry in points
        for key, *_ in SERIES
        if isinstance(entry.get(key), int | float) and entry[key] > 0
    ]
    if not points or not values:
        return _svg([_text(WIDTH / 2, HEIGHT / 2, "no latency figures", anchor="middle")])
    x_max = max(x for x, _ in points) * 1.1
    low = 10 ** math.floor(math.log10(min(values)))
    high = 10 ** math.ceil(math.log10(max(values)))
    if high <= low:
        high = low * 10
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + plot_w * x / x_max

    def sy(ms: float) -> float:
        share = (math.log10(ms) - math.log10(low)) / (math.log10(high) - math.log10(low))
        return TOP + plot_h * (1 - share)

    parts = [
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>'
    ]
    decade = low
    while decade <= high * 1.0001:
        for factor in (1, 2, 5):
            ms = decade * factor
            if ms > high * 1.0001:
                break
            y = sy(ms)
            shade = "#ccc" if factor == 1 else "#eee"
            parts.append(
                f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" '
                f'stroke="{shade}"/>'
            )
            parts.append(_text(LEFT - 6, y + 4, _ms_label(ms), anchor="end", size=11))
        decade *= 10
    unsustained = False
    for x, entry in points:
        parts.append(
            f'<line x1="{sx(x):.1f}" y1="{TOP}" x2="{sx(x):.1f}" y2="{TOP + plot_h}" '
            'stroke="#eee"/>'
        )
        mark = "" if entry.get("sustained", True) else " *"
        unsustained = unsustained or bool(mark)
        label = f"{x:,.0f}{mark}"
        if isinstance(entry.get("fraction"), int | float):
            label = f"{entry['fraction']:.0%}: {label}"
        parts.append(_text(sx(x), TOP + plot_h + 18, label, anchor="middle", size=11))
    if unsustained:
        parts.append(
            _text(LEFT, HEIGHT - 2, "* not sustained: latency grew during that run", size=10)
        )
    parts.append(_text(LEFT + plot_w / 2, HEIGHT - 15, "offered load (sagas/s)", anchor="middle"))
    parts.append(
        f'<text x="18" y="{TOP + plot_h / 2}" font-size="12" font-family="sans-serif" '
        f'text-anchor="middle" transform="rotate(-90 18 {TOP + plot_h / 2})">latency (ms, log)'
        "</text>"
    )
    legend_y = TOP + 10
    for key, label, colour, dashed in SERIES:
        line = [(sx(x), sy(float(e[key]))) for x, e in points if _positive(e.get(key))]
        if not line:
            continue
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in line)
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in line]
        lx = LEFT + plot_w + 15
        parts.append(
            f'<line x1="{lx}" y1="{legend_y}" x2="{lx + 24}" y2="{legend_y}" stroke="{colour}" '
            f'stroke-width="2"{dash}/>'
        )
        parts.append(_text(lx + 30, legend_y + 4, label, size=11))
        legend_y += 20
    title = "sagalog: latency against load"
    maximum = results.get("sagas_per_s")
    if maximum:
        title += f" (sustained maximum {maximum:,.0f} sagas/s)"
    parts.append(_text(WIDTH / 2, 25, title, anchor="middle", size=14))
    machine = results.get("machine") or {}
    if machine:
        note = f"{machine.get('cores')} cores, {machine.get('cpu_model')}, broker co-located"
        parts.append(_text(WIDTH / 2, 42, note, anchor="middle", size=10))
    return _svg(parts)


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0


def _ms_label(ms: float) -> str:
    return f"{ms:,.0f}" if ms >= 1 else f"{ms:g}"


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-family="sans-serif" '
        f'text-anchor="{anchor}">{escape(text)}</text>'
    )


def _svg(parts: list[str]) -> str:
    body = "\n  ".join(parts)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}">\n  <rect width="100%" height="100%" fill="white"/>\n'
        f"  {body}\n</svg>\n"
    )
