"""The HTML report: one self-contained file a process owner opens in a browser.

Everything is inline (styles, SVG charts); there is no script and no external asset,
so the file can be mailed, archived next to an audit, or opened offline. Per flow
version it shows the pictures first (time in state, time per step, throughput, how
workflows ended) and the tables behind them after.
"""

from __future__ import annotations

from html import escape

from sagalog.analytics.charts import (
    DwellBar,
    ThroughputBucket,
    bucket_hours,
    dwell_chart,
    terminal_chart,
    throughput_chart,
)
from sagalog.analytics.report import AnalyticsReport
from sagalog.analytics.statistics import FlowSummary
from sagalog.analytics.tables import Table, human, report_tables, rows_of
from sagalog.analytics.timerange import iso

_STYLE = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f1f5f9; color: #0f172a;
  font: 14px/1.5 Inter, "Segoe UI", Helvetica, Arial, sans-serif; }
main { max-width: 1040px; margin: 0 auto; padding: 32px 24px 48px; }
header { margin-bottom: 20px; }
.eyebrow { margin: 0; color: #1d4ed8; font-weight: 600; letter-spacing: .06em;
  text-transform: uppercase; font-size: 12px; }
h1 { margin: 4px 0 6px; font-size: 28px; letter-spacing: -.01em; }
h2 { margin: 36px 0 12px; font-size: 22px; display: flex; align-items: center; gap: 10px; }
h3 { margin: 0 0 2px; font-size: 16px; }
.meta, .hint { color: #64748b; margin: 0; }
.hint { margin-bottom: 10px; font-size: 13px; }
.tag { background: #dbeafe; color: #1d4ed8; border-radius: 999px; padding: 1px 10px;
  font-size: 13px; font-weight: 600; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(124px, 1fr)); gap: 12px;
  margin: 12px 0; }
.card { background: #fff; border: 1px solid #e2e8f0; border-radius: 10px; padding: 12px 16px; }
.card .value { font-size: 24px; font-weight: 650; letter-spacing: -.01em; }
.card .label { color: #64748b; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card.bad .value { color: #b91c1c; }
.panel { background: #fff; border: 1px solid #e2e8f0; border-radius: 12px; padding: 18px 20px;
  margin: 14px 0; }
.notice { border-radius: 10px; padding: 12px 16px; margin: 14px 0; border: 1px solid; }
.notice.info { background: #eff6ff; border-color: #bfdbfe; color: #1e3a8a; }
.notice.warn { background: #fffbeb; border-color: #fde68a; color: #78350f; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 6px 10px; border-bottom: 1px solid #e2e8f0; text-align: left;
  white-space: nowrap; }
th { color: #475569; font-weight: 600; background: #f8fafc; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.error td:first-child { color: #b91c1c; font-weight: 600; }
.tables { display: grid; gap: 14px; margin-top: 14px; }
.tables .panel { margin: 0; }
.scroll { overflow-x: auto; }
footer { margin-top: 36px; color: #64748b; font-size: 12.5px; }
footer li { margin: 3px 0; }
code { background: #e2e8f0; border-radius: 4px; padding: 0 4px; font-size: 12px; }
"""

_TABLES_SHOWN = ("dwell_by_state", "dwell_by_step", "slowest_transitions", "exits", "in_flight")


def render_html(report: AnalyticsReport) -> str:
    """The whole report as one HTML document."""
    tables = {t.name: t for t in report_tables(report)}
    title = f"Workflow analytics · {report.topic}"
    span = f"{_time(report.time_range.since_ms)} → {_time(report.time_range.until_ms)} UTC"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body><main>",
        "<header>",
        '<p class="eyebrow">sagalog analytics</p>',
        "<h1>Workflow analytics</h1>",
        f'<p class="meta">Transitions on <code>{escape(report.topic)}</code> published '
        f"{escape(span)}"
        + (f" · flow <code>{escape(report.flow)}</code>" if report.flow else "")
        + f" · generated {escape(_time(report.generated_ms))} UTC</p>",
        "</header>",
    ]
    parts.extend(_notices(report))
    if not report.empty:
        parts.append(_overall_cards(report))
    for summary in report.analytics.summaries:
        parts.append(_flow_section(report, summary, tables))
    if report.examples:
        parts.append(_undecodable(report))
    parts.append(_footer())
    parts.append("</main></body></html>")
    return "\n".join(parts)


def _notices(report: AnalyticsReport) -> list[str]:
    notices = []
    if report.empty:
        notices.append(
            '<div class="notice info" id="empty-range"><strong>No transitions in this '
            f"range.</strong> {report.read:,} record(s) were read from "
            f"<code>{escape(report.topic)}</code>; widen the range or check the topic.</div>"
        )
    if report.undecodable:
        notices.append(
            f'<div class="notice warn" id="undecodable"><strong>{report.undecodable:,} '
            "record(s) could not be decoded</strong> and are left out of every figure; "
            "the first are listed at the end of the report.</div>"
        )
    return notices


def _overall_cards(report: AnalyticsReport) -> str:
    summaries = report.analytics.summaries
    ended = sum(s.ended for s in summaries)
    completed = sum(s.completed for s in summaries)
    cards = [
        ("transitions", f"{sum(s.transitions for s in summaries):,}", False),
        ("workflows seen", f"{sum(s.workflows for s in summaries):,}", False),
        ("started", f"{sum(s.started for s in summaries):,}", False),
        ("ended", f"{ended:,}", False),
        ("completed of ended", human("share", completed / ended) if ended else "-", False),
        ("in flight", f"{sum(s.in_flight for s in summaries):,}", False),
    ]
    if report.undecodable:
        cards.append(("undecodable records", f"{report.undecodable:,}", True))
    return _cards(cards)


def _cards(cards: list[tuple[str, str, bool]]) -> str:
    body = "".join(
        f'<div class="card{" bad" if bad else ""}"><div class="value">{escape(value)}</div>'
        f'<div class="label">{escape(label)}</div></div>'
        for label, value, bad in cards
    )
    return f'<section class="cards">{body}</section>'


def _flow_section(report: AnalyticsReport, summary: FlowSummary, tables: dict[str, Table]) -> str:
    a = report.analytics
    flow, version = summary.flow, summary.flow_version
    key = (flow, version)
    label = f"{flow} v{version}"
    states = [
        DwellBar(d.state, d.p50_ms, d.p95_ms, d.count)
        for d in a.states
        if (d.flow, d.flow_version) == key
    ]
    steps = [
        DwellBar(d.step or "-", d.p50_ms, d.p95_ms, d.count, _doing(d.state))
        for d in a.steps
        if (d.flow, d.flow_version) == key
    ]
    hours = [
        ThroughputBucket(h.hour_ms, h.started, h.ended, h.completed)
        for h in a.hours
        if (h.flow, h.flow_version) == key
    ]
    buckets, unit = bucket_hours(hours) if hours else ([], "hour")
    terminals = [t for t in a.terminals if (t.flow, t.flow_version) == key]
    ends = [(t.state, t.count) for t in terminals]
    errors = sum(t.count for t in terminals if t.error)
    parts = [
        f'<section class="flow" id="flow-{escape(flow)}-v{version}">',
        f'<h2>{escape(flow)} <span class="tag">v{version}</span></h2>',
        _cards(
            [
                ("started", f"{summary.started:,}", False),
                ("ended", f"{summary.ended:,}", False),
                (
                    "completed of ended",
                    human("share", summary.completion_rate)
                    if summary.completion_rate is not None
                    else "-",
                    False,
                ),
                ("ended in error", f"{errors:,}", errors > 0),
                ("in flight", f"{summary.in_flight:,}", False),
            ]
        ),
        _panel(
            "Time in state",
            "How long workflows stayed in each state before moving on.",
            dwell_chart(states, caption=f"{label}: time in state, p50 and p95"),
            "chart-states",
        ),
        _panel(
            "Time per step",
            "Working on each step, waiting for a person at a gate, or undoing a step.",
            dwell_chart(steps, caption=f"{label}: time per step, p50 and p95"),
            "chart-steps",
        ),
        _panel(
            "Throughput",
            "Workflows started and ended per week; only the busy weeks are drawn (the "
            "transitions span too long a time to draw every one)."
            if unit == "busy week"
            else f"Workflows started and ended per {unit}.",
            throughput_chart(buckets, caption=f"{label}: started and ended per {unit}", unit=unit),
            "chart-throughput",
        ),
        _panel(
            "How workflows ended",
            "Terminal states; everything but completed is an error.",
            terminal_chart(ends, caption=f"{label}: terminal states"),
            "chart-terminal",
        ),
        '<div class="tables">',
    ]
    for name in _TABLES_SHOWN:
        table = rows_of(tables[name], flow, version)
        parts.append(_panel(table.title, table.description, _html_table(table), f"table-{name}"))
    parts.append("</div></section>")
    return "\n".join(parts)


def _doing(state: str) -> str:
    return {
        "running": "",
        "pending_approval": "waiting for a person",
        "awaiting_input": "waiting for input",
        "compensating": "undoing",
    }.get(state, state)


def _panel(title: str, hint: str, body: str, ident: str) -> str:
    return (
        f'<figure class="panel" id="{escape(ident)}" style="margin-left:0;margin-right:0">'
        f'<h3>{escape(title)}</h3><p class="hint">{escape(hint)}</p>{body}</figure>'
    )


def _html_table(table: Table) -> str:
    if not table.rows:
        return '<p class="hint">None in this range.</p>'
    head = "".join(
        f'<th class="{"num" if c.numeric else ""}">{escape(c.header)}</th>' for c in table.columns
    )
    rows = []
    for row in table.rows:
        cells = "".join(
            f'<td class="{"num" if c.numeric else ""}">{escape(human(c.kind, v))}</td>'
            for c, v in zip(table.columns, row, strict=True)
        )
        error = table.name == "terminal_states" and row[-1] == "yes"
        rows.append(f'<tr class="{"error" if error else ""}">{cells}</tr>')
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _undecodable(report: AnalyticsReport) -> str:
    rows = "".join(
        f'<tr><td class="num">{e.partition}</td><td class="num">{e.offset}</td>'
        f'<td style="white-space:normal">{escape(e.reason)}</td></tr>'
        for e in report.examples
    )
    more = report.undecodable - len(report.examples)
    return _panel(
        "Undecodable records",
        f"{report.undecodable:,} record(s) did not decode"
        + (f"; the first {len(report.examples)} are listed" if more > 0 else "")
        + f". sagalog tail {report.topic} shows them as they are.",
        '<div class="scroll"><table><thead><tr><th class="num">partition</th>'
        f'<th class="num">offset</th><th>why</th></tr></thead><tbody>{rows}</tbody></table></div>',
        "undecodable-records",
    )


def _footer() -> str:
    return (
        "<footer><ul>"
        "<li>Percentiles are nearest-rank: every figure is a duration that was observed.</li>"
        "<li>Time in a state is the <code>time_in_previous_state_ms</code> of the "
        "transitions leaving it; the range selects transitions by when the tracker "
        "published them.</li>"
        "<li>In flight: workflows whose last transition in the range entered a "
        "non-terminal state; “longest there” is measured to the end of the range.</li>"
        "</ul></footer>"
    )


def _time(ms: int) -> str:
    return iso(ms).replace("T", " ").removesuffix("Z")
