"""The report as tables: one model for the terminal, CSV, Parquet and the HTML report.

Cells hold raw values (durations and times in epoch ms, shares as fractions); each
column says what kind of value it holds, and each output formats it its own way:
people read ``4h 12m``, other tools read ``15120000`` in a column named ``..._ms``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from sagalog.analytics.records import flow_label
from sagalog.analytics.report import AnalyticsReport

Kind = Literal["text", "int", "ms", "time", "share"]


@dataclass(frozen=True, slots=True)
class Column:
    """``name``: the machine name (CSV header); ``header``: what people read."""

    name: str
    header: str
    kind: Kind = "text"

    @property
    def numeric(self) -> bool:
        """Counts, durations and shares: every output aligns them right."""
        return self.kind in ("int", "ms", "share")


@dataclass(frozen=True, slots=True)
class Table:
    """One table of the report; ``name`` is also its CSV/Parquet file name."""

    name: str
    title: str
    description: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]


_FLOW = (Column("flow", "flow"), Column("flow_version", "version", "int"))
_PERCENTILES = (
    Column("count", "count", "int"),
    Column("p50_ms", "p50", "ms"),
    Column("p95_ms", "p95", "ms"),
    Column("p99_ms", "p99", "ms"),
    Column("max_ms", "max", "ms"),
)


def report_tables(report: AnalyticsReport) -> list[Table]:
    """Every table of ``report``, in reading order."""
    a = report.analytics
    return [
        Table(
            "summary",
            "Summary",
            "Per flow version: transitions and workflows seen, started, ended, in flight.",
            (
                *_FLOW,
                Column("transitions", "transitions", "int"),
                Column("workflows", "workflows", "int"),
                Column("started", "started", "int"),
                Column("ended", "ended", "int"),
                Column("completed", "completed", "int"),
                Column("completion_rate", "completed of ended", "share"),
                Column("in_flight", "in flight", "int"),
            ),
            tuple(
                (
                    s.flow,
                    s.flow_version,
                    s.transitions,
                    s.workflows,
                    s.started,
                    s.ended,
                    s.completed,
                    s.completion_rate,
                    s.in_flight,
                )
                for s in a.summaries
            ),
        ),
        Table(
            "dwell_by_state",
            "Time in state",
            "How long workflows stayed in each state before moving on.",
            (*_FLOW, Column("state", "state"), *_PERCENTILES),
            tuple(
                (d.flow, d.flow_version, d.state, d.count, d.p50_ms, d.p95_ms, d.p99_ms, d.max_ms)
                for d in a.states
            ),
        ),
        Table(
            "dwell_by_step",
            "Time per step",
            "Working on a step (running), waiting for a person (pending_approval) or "
            "undoing it (compensating).",
            (*_FLOW, Column("step", "step"), Column("state", "state"), *_PERCENTILES),
            tuple(
                (
                    d.flow,
                    d.flow_version,
                    d.step,
                    d.state,
                    d.count,
                    d.p50_ms,
                    d.p95_ms,
                    d.p99_ms,
                    d.max_ms,
                )
                for d in a.steps
            ),
        ),
        Table(
            "slowest_transitions",
            "Slowest transitions",
            "The longest stays in one state.",
            (
                *_FLOW,
                Column("workflow_id", "workflow"),
                Column("state", "state"),
                Column("step", "step"),
                Column("to_state", "then"),
                Column("duration_ms", "stayed", "ms"),
                Column("left_at", "left at", "time"),
            ),
            tuple(
                (
                    s.flow,
                    s.flow_version,
                    s.workflow_id,
                    s.state,
                    s.step,
                    s.to_state,
                    s.duration_ms,
                    s.left_at_ms,
                )
                for s in a.slowest
            ),
        ),
        Table(
            "terminal_states",
            "How workflows ended",
            "Terminal states by frequency; all but completed are errors.",
            (
                *_FLOW,
                Column("state", "state"),
                Column("count", "count", "int"),
                Column("share", "share", "share"),
                Column("error", "error"),
            ),
            tuple(
                (t.flow, t.flow_version, t.state, t.count, t.share, "yes" if t.error else "no")
                for t in a.terminals
            ),
        ),
        Table(
            "exits",
            "Where workflows left the forward path",
            "The state and step a failure, rejection or timeout took workflows from.",
            (
                *_FLOW,
                Column("state", "from state"),
                Column("step", "at step"),
                Column("to_state", "into"),
                Column("count", "count", "int"),
            ),
            tuple((e.flow, e.flow_version, e.state, e.step, e.to_state, e.count) for e in a.exits),
        ),
        Table(
            "throughput_by_hour",
            "Throughput by hour",
            "Workflows started and ended per hour (UTC).",
            (
                *_FLOW,
                Column("hour", "hour", "time"),
                Column("started", "started", "int"),
                Column("ended", "ended", "int"),
                Column("completed", "completed", "int"),
            ),
            tuple(
                (h.flow, h.flow_version, h.hour_ms, h.started, h.ended, h.completed)
                for h in a.hours
            ),
        ),
        Table(
            "in_flight",
            "In flight",
            "Workflows not ended, by where they are, and the longest time one has been there.",
            (
                *_FLOW,
                Column("state", "state"),
                Column("step", "step"),
                Column("count", "count", "int"),
                Column("oldest_ms", "longest there", "ms"),
                Column("oldest_workflow", "longest waiting"),
            ),
            tuple(
                (
                    f.flow,
                    f.flow_version,
                    f.state,
                    f.step,
                    f.count,
                    f.oldest_ms,
                    f.oldest_workflow,
                )
                for f in a.in_flight
            ),
        ),
    ]


def rows_of(table: Table, flow: str, version: int) -> Table:
    """``table`` restricted to one flow version, without the flow columns."""
    if table.columns[:2] != _FLOW:
        return table
    return Table(
        table.name,
        table.title,
        table.description,
        table.columns[2:],
        tuple(row[2:] for row in table.rows if row[0] == flow and row[1] == version),
    )


def flow_versions_of(table: Table) -> list[tuple[str, int]]:
    return sorted({(row[0], row[1]) for row in table.rows})


def label(flow: str, version: int) -> str:
    return flow_label(flow, version)


def human(kind: Kind, value: Any) -> str:
    """A cell as people read it; ``-`` for nothing."""
    if value is None or value == "":
        return "-"
    if kind == "ms":
        return human_duration(int(value))
    if kind == "time":
        return dt.datetime.fromtimestamp(value / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")
    if kind == "share":
        return f"{value * 100:.1f}%"
    if kind == "int":
        return f"{value:,}"
    return str(value)


def machine(kind: Kind, value: Any) -> Any:
    """A cell as other tools read it: numbers as numbers, times as ISO-8601 UTC."""
    if value is None:
        return ""
    if kind == "time":
        return dt.datetime.fromtimestamp(value / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if kind == "share":
        return round(float(value), 4)
    return value


def human_duration(ms: int) -> str:
    """``350ms``, ``12.5s``, ``4m 05s``, ``3h 20m``, ``2d 04h``: two units at most."""
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    seconds = ms // 1000
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    minutes = seconds // 60
    if minutes < 24 * 60:
        return f"{minutes // 60}h {minutes % 60:02d}m"
    hours = minutes // 60
    return f"{hours // 24}d {hours % 24:02d}h"
