"""The report's outputs: time ranges, tables, CSV, Parquet's absence, charts, HTML."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pytest

from sagalog.analytics import TimeRange, TransitionLog, build_report, parse_time_range
from sagalog.analytics.charts import DwellBar, ThroughputBucket, bucket_hours, dwell_chart
from sagalog.analytics.export import parquet_available, write_csv, write_parquet
from sagalog.analytics.html_report import render_html
from sagalog.analytics.report import AnalyticsReport
from sagalog.analytics.tables import human_duration, report_tables
from sagalog.analytics.timerange import parse_moment
from sagalog.cli.analytics import print_tables
from sagalog.errors import ConfigurationError
from sagalog.replay import UndecodableRecord

from .test_analytics_statistics import MIN, T0, TRANSITIONS, H

NOW = T0 + 20 * H
RANGE = TimeRange(T0 - H, NOW)


def report(**extra: Any) -> AnalyticsReport:
    log = TransitionLog(transitions=list(TRANSITIONS), read=len(TRANSITIONS), **extra)
    return build_report(log, topic="sagalog.transitions", time_range=RANGE, generated_ms=NOW)


# --- time ranges -------------------------------------------------------------------------


def test_relative_iso_and_now() -> None:
    now = 1_780_000_000_000
    assert parse_moment("7d", now_ms=now, option="--since") == now - 7 * 24 * H
    assert parse_moment("90m", now_ms=now, option="--since") == now - 90 * MIN
    assert parse_moment("now", now_ms=now, option="--until") == now
    assert parse_moment("2026-05-01", now_ms=now, option="--since") == 1_777_593_600_000
    assert parse_moment("2026-05-01T02:00:00+02:00", now_ms=now, option="--since") == (
        1_777_593_600_000
    )
    assert parse_moment("2026-05-01T00:00:00Z", now_ms=now, option="--since") == 1_777_593_600_000


def test_bad_and_reversed_ranges_say_what_to_type() -> None:
    with pytest.raises(ConfigurationError, match="--since 'last week' is not a time: use"):
        parse_time_range("last week", "now", now_ms=NOW)
    with pytest.raises(ConfigurationError, match="is not before --until"):
        parse_time_range("1h", "2h", now_ms=NOW)


# --- tables -------------------------------------------------------------------------------


def test_durations_read_like_a_person_writes_them() -> None:
    assert [human_duration(ms) for ms in (0, 350, 12_500, 245_000, 12_000_000, 183_600_000)] == [
        "0ms",
        "350ms",
        "12.5s",
        "4m 05s",
        "3h 20m",
        "2d 03h",
    ]


def test_terminal_table_aligns_numbers_right(capsys: pytest.CaptureFixture[str]) -> None:
    states = next(t for t in report_tables(report()) if t.name == "dwell_by_state")
    print_tables([states])
    _, title, header, *rows = capsys.readouterr().out.splitlines()
    assert title == "Time in state"
    assert header.split() == ["flow", "version", "state", "count", "p50", "p95", "p99", "max"]
    pending = next(line for line in rows if "pending_approval" in line)
    assert pending.split()[3:5] == ["12", "4h"]
    assert {len(line) for line in rows} == {len(header)}  # numbers end at the same column


def test_csv_one_file_per_table_with_machine_values(tmp_path: Path) -> None:
    written = write_csv(report_tables(report()), tmp_path / "out")
    assert {p.name for p in written} == {
        "summary.csv",
        "dwell_by_state.csv",
        "dwell_by_step.csv",
        "slowest_transitions.csv",
        "terminal_states.csv",
        "exits.csv",
        "throughput_by_hour.csv",
        "in_flight.csv",
    }
    with (tmp_path / "out" / "dwell_by_state.csv").open() as f:
        rows = list(csv.DictReader(f))
    pending = next(r for r in rows if r["state"] == "pending_approval")
    assert pending["p50_ms"] == str(4 * H) and pending["count"] == "12"
    with (tmp_path / "out" / "throughput_by_hour.csv").open() as f:
        first = next(csv.DictReader(f))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:00:00Z", first["hour"])


@pytest.mark.skipif(parquet_available(), reason="pyarrow is installed here")
def test_parquet_without_pyarrow_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"pip install pyarrow"):
        write_parquet(report_tables(report()), tmp_path)


# --- charts and HTML --------------------------------------------------------------------------


def test_throughput_buckets_fill_quiet_hours_and_widen_when_long() -> None:
    rows = [ThroughputBucket(T0, 3, 0, 0), ThroughputBucket(T0 + 5 * H, 0, 2, 1)]
    buckets, unit = bucket_hours(rows)
    assert unit == "hour" and len(buckets) == 6 and buckets[1].started == 0
    days = [ThroughputBucket(T0 + d * 24 * H, 1, 1, 1) for d in range(10)]
    buckets, unit = bucket_hours(days)
    assert unit == "day" and len(buckets) == 10
    stray = [ThroughputBucket(0, 1, 0, 0), ThroughputBucket(T0, 5, 5, 5)]  # a clock at zero
    buckets, unit = bucket_hours(stray)
    assert unit == "busy week" and len(buckets) == 2


def test_dwell_chart_labels_every_bar_and_scales() -> None:
    svg = dwell_chart(
        [DwellBar("running", 20_000, 90_000, 40), DwellBar("pending_approval", 4 * H, 19 * H, 9)],
        caption="time in state",
    )
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "p50 4h 00m · p95 19h 00m" in svg and "n = 40" in svg
    assert ">1m<" in svg and ">1d<" in svg  # log-scale ticks spanning both


def test_html_report_is_self_contained() -> None:
    html = render_html(report())
    assert html.startswith("<!doctype html>")
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # no external asset
    assert html.count("<svg") == 4  # states, steps, throughput, terminal
    assert "procurement" in html and "pending_approval" in html
    assert 'id="empty-range"' not in html and 'id="undecodable"' not in html


def test_html_report_of_an_empty_range_says_so() -> None:
    empty = build_report(
        TransitionLog(transitions=[]), topic="t", time_range=RANGE, generated_ms=NOW
    )
    html = render_html(empty)
    assert 'id="empty-range"' in html and "No transitions in this range" in html
    assert "<svg" not in html


def test_html_report_lists_undecodable_records() -> None:
    html = render_html(
        report(undecodable=2, examples=[UndecodableRecord(1, 7, "not <wire> format")])
    )
    assert 'id="undecodable"' in html and "2 record(s) could not be decoded" in html
    assert "not &lt;wire&gt; format" in html  # escaped


def test_the_readme_examples_parse(repo_root: Path) -> None:
    """The docs' commands use options the command has, so the docs cannot rot."""
    from sagalog.cli.analytics import analytics

    examples = [
        line.split("#")[0].split()
        for line in (repo_root / "docs" / "analytics.md").read_text().splitlines()
        if line.startswith("sagalog analytics")
    ]
    assert examples
    for words in examples:
        analytics.make_context("analytics", words[2:])  # a UsageError on an unknown option
    docstring = analytics.help or ""
    for line in docstring.splitlines():
        if line.strip().startswith("sagalog analytics"):
            analytics.make_context("analytics", line.split()[2:])
