"""The console's analytics page: throughput over the last hour and how long workflows
take, per flow version, from the read model's ``start/`` index: pure functions.

Every figure comes from index entries (``Facets``: state, flow, version, started and
entered time), never a record: a workflow that ended entered its terminal state when
it ended, so ``entered_ms - started_ms`` is its duration. The page reads the workflows
started in a window (the last day by default), newest first, up to a budget: past it
the page says how far back it got, so a million workflows never cost a million reads.

The charts are drawn by Chart.js (vendored in ``static/``, see its README) from the
same numbers the tables show, passed as JSON in a ``data-chart`` attribute: no inline
script, so the Content-Security-Policy stays ``script-src 'self'`` (Vega-Lite, the
issue's example, compiles its expressions with ``new Function`` and would need
``'unsafe-eval'``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sagalog.flows.states import TERMINAL_STATES, WorkflowState
from sagalog.services.gateway.workflow_index import Facets

MINUTE_MS = 60_000
THROUGHPUT_MINUTES = 60
DEFAULT_WINDOW_MS = 24 * 3_600_000
BUDGET = 200_000
"""The most index entries one page reads."""


@dataclass(frozen=True)
class Throughput:
    """Workflows started and ended in each minute of the last hour (oldest first)."""

    minute_ms: tuple[int, ...]
    started: tuple[int, ...]
    ended: tuple[int, ...]

    @property
    def started_total(self) -> int:
        return sum(self.started)

    @property
    def ended_total(self) -> int:
        return sum(self.ended)


@dataclass(frozen=True)
class Durations:
    """How long the workflows of one flow version that ended took (nearest-rank
    percentiles), and how many are still in flight."""

    flow: str
    version: int
    ended: int
    completed: int
    in_flight: int
    p50_ms: int | None
    p95_ms: int | None
    p99_ms: int | None
    max_ms: int | None


@dataclass(frozen=True)
class Analytics:
    throughput: Throughput
    durations: tuple[Durations, ...]
    read: int
    """Index entries read."""
    oldest_ms: int | None
    """The start of the oldest workflow read; before the window's start when the budget
    ran out first (then the figures cover less than the window)."""
    capped: bool


def percentile(ordered: Sequence[int], fraction: float) -> int | None:
    """The nearest-rank percentile of ``ordered`` (ascending); None when it is empty."""
    if not ordered:
        return None
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def analyse(
    newest_first: Iterable[Facets], *, now_ms: int, window_ms: int, budget: int = BUDGET
) -> Analytics:
    """The page's figures from the workflows started in ``[now - window, now]``, newest
    first, reading at most ``budget`` of them.

    Throughput counts a workflow started in a minute of the last hour, and one that
    ended in it (among those started in the window: a workflow that ran longer than the
    window is not seen ending)."""
    first_minute = (now_ms // MINUTE_MS - THROUGHPUT_MINUTES + 1) * MINUTE_MS
    started = [0] * THROUGHPUT_MINUTES
    ended = [0] * THROUGHPUT_MINUTES
    lasted: dict[tuple[str, int], list[int]] = defaultdict(list)
    completed: dict[tuple[str, int], int] = defaultdict(int)
    flying: dict[tuple[str, int], int] = defaultdict(int)
    read = 0
    oldest: int | None = None
    capped = False
    for facets in newest_first:
        if facets.started_ms < now_ms - window_ms:
            break
        if read >= budget:
            capped = True
            break
        read += 1
        oldest = facets.started_ms
        version = (facets.flow, facets.flow_version)
        if first_minute <= facets.started_ms <= now_ms:
            started[(facets.started_ms - first_minute) // MINUTE_MS] += 1
        if facets.state in TERMINAL_STATES:
            lasted[version].append(max(facets.entered_ms - facets.started_ms, 0))
            if facets.state is WorkflowState.COMPLETED:
                completed[version] += 1
            if first_minute <= facets.entered_ms <= now_ms:
                ended[(facets.entered_ms - first_minute) // MINUTE_MS] += 1
        else:
            flying[version] += 1
    rows = []
    for version in sorted(set(lasted) | set(flying)):
        ordered = sorted(lasted[version])
        rows.append(
            Durations(
                flow=version[0],
                version=version[1],
                ended=len(ordered),
                completed=completed[version],
                in_flight=flying[version],
                p50_ms=percentile(ordered, 0.50),
                p95_ms=percentile(ordered, 0.95),
                p99_ms=percentile(ordered, 0.99),
                max_ms=ordered[-1] if ordered else None,
            )
        )
    throughput = Throughput(
        minute_ms=tuple(first_minute + n * MINUTE_MS for n in range(THROUGHPUT_MINUTES)),
        started=tuple(started),
        ended=tuple(ended),
    )
    return Analytics(throughput, tuple(rows), read, oldest, capped)


# -- the charts (Chart.js configurations: data only, no functions) ------------------------

_STARTED = "#2456c7"
_ENDED = "#1f7a3d"
_PERCENTILES = (("p50", "#9db5ea"), ("p95", "#2456c7"), ("p99", "#0f2d73"))


def throughput_chart(throughput: Throughput, labels: Sequence[str]) -> dict[str, Any]:
    """A bar chart of the workflows started and ended per minute."""
    return {
        "type": "bar",
        "data": {
            "labels": list(labels),
            "datasets": [
                {"label": "started", "data": list(throughput.started), "backgroundColor": _STARTED},
                {"label": "ended", "data": list(throughput.ended), "backgroundColor": _ENDED},
            ],
        },
        "options": {
            "animation": False,
            "maintainAspectRatio": False,
            "scales": {
                "x": {"title": {"display": True, "text": "minute (UTC)"}},
                "y": {"beginAtZero": True, "title": {"display": True, "text": "workflows"}},
            },
        },
    }


_UNITS = (("seconds", 1000), ("minutes", MINUTE_MS), ("hours", 60 * MINUTE_MS))


def durations_chart(rows: Sequence[Durations]) -> dict[str, Any]:
    """A bar chart of the duration percentiles per flow version, in the largest unit
    in which the longest p99 is at least 2 (seconds, minutes or hours), so a flow of a
    few seconds does not draw as zero minutes."""
    measured = [r for r in rows if r.ended]
    longest = max((r.p99_ms or 0 for r in measured), default=0)
    unit, size = _UNITS[0]
    for name, ms in _UNITS:
        if longest >= 2 * ms:
            unit, size = name, ms
    return {
        "type": "bar",
        "data": {
            "labels": [f"{r.flow} v{r.version}" for r in measured],
            "datasets": [
                {
                    "label": name,
                    "data": [round((getattr(r, f"{name}_ms") or 0) / size, 2) for r in measured],
                    "backgroundColor": colour,
                }
                for name, colour in _PERCENTILES
            ],
        },
        "options": {
            "animation": False,
            "maintainAspectRatio": False,
            "scales": {"y": {"beginAtZero": True, "title": {"display": True, "text": unit}}},
        },
    }
