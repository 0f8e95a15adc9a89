"""``sagalog analytics``: time in state, slowest transitions, errors and throughput.

Exit codes: 0 a report was made (also when the range holds no transition, or some
records did not decode: both are said on stderr and in the report), 2 bad input
(a time, a missing topic, --parquet without pyarrow), 3 Kafka or the registry
unreachable.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from sagalog.analytics.export import require_parquet, write_csv, write_parquet
from sagalog.analytics.html_report import render_html
from sagalog.analytics.report import AnalyticsReport, build_report
from sagalog.analytics.source import read_transitions
from sagalog.analytics.tables import Table, human, report_tables
from sagalog.analytics.timerange import iso, parse_time_range
from sagalog.cli.context import Project, pass_project
from sagalog.cli.progress_bars import ProgressBars
from sagalog.cli.tables import print_table
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import SchemaError
from sagalog.personal.cipher import personal_data
from sagalog.tracker import TRANSITIONS_TOPIC


@click.command()
@click.option(
    "--since",
    default="7d",
    show_default=True,
    help="Start of the range: a duration before now (7d, 12h, 30m), an ISO-8601 time "
    "(2026-05-01, 2026-05-01T09:00:00Z; UTC unless a zone is given) or 'now'.",
)
@click.option("--until", default="now", show_default=True, help="End of the range (excluded).")
@click.option(
    "--topic",
    default=TRANSITIONS_TOPIC,
    show_default=True,
    help="The tracker's transitions topic.",
)
@click.option("--flow", metavar="NAME", help="Only this flow (all versions).")
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Slowest transitions listed per flow version.",
)
@click.option(
    "--csv",
    "csv_dir",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write one CSV file per table into DIR.",
)
@click.option(
    "--parquet",
    "parquet_dir",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write one Parquet file per table into DIR (needs `pip install pyarrow`).",
)
@click.option(
    "--html",
    "html_file",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML report with charts to FILE.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print no tables (write the files only).")
@pass_project
def analytics(
    project: Project,
    since: str,
    until: str,
    topic: str,
    flow: str | None,
    top: int,
    csv_dir: Path | None,
    parquet_dir: Path | None,
    html_file: Path | None,
    quiet: bool,
) -> None:
    """Time in state (p50, p95, p99), slowest transitions, how workflows ended,
    throughput by hour and workflows in flight, per flow version.

    Reads the StateTransition events the saga tracker published in the range,
    seeking by time (the rest of the topic is not read). Records that do not decode
    are counted and reported, never fatal.

    \b
    Examples:
      sagalog analytics --since 7d
      sagalog analytics --since 2026-05-01 --until 2026-05-08 --html report.html --csv out/
    """
    if parquet_dir is not None:
        require_parquet()
    now_ms = time.time_ns() // 1_000_000
    time_range = parse_time_range(since, until, now_ms=now_ms)
    codec = EventCodec(
        catalog=_catalog(project),
        registry=SchemaRegistry(project.settings),
        personal=personal_data(project.settings, reveal=True),
    )
    reading = _Reading(f"reading {topic}")
    try:
        log = read_transitions(
            project.settings,
            codec,
            topic,
            time_range,
            flow=flow,
            on_plan=reading.planned,
            progress=reading.read,
        )
    finally:
        reading.bars.close()
    report = build_report(
        log, topic=topic, time_range=time_range, generated_ms=now_ms, flow=flow, top=top
    )
    tables = report_tables(report)
    _say_what_was_read(report)
    if not quiet and not report.empty:
        print_tables(tables)
    if csv_dir is not None:
        written = write_csv(tables, csv_dir)
        click.echo(f"wrote {len(written)} CSV files to {csv_dir}", err=True)
    if parquet_dir is not None:
        written = write_parquet(tables, parquet_dir)
        click.echo(f"wrote {len(written)} Parquet files to {parquet_dir}", err=True)
    if html_file is not None:
        html_file.parent.mkdir(parents=True, exist_ok=True)
        html_file.write_text(render_html(report), encoding="utf-8")
        click.echo(f"wrote the HTML report to {html_file}", err=True)


def _catalog(project: Project) -> SchemaCatalog:
    """The project's schemas; none outside a project (records are then read as written)."""
    try:
        return project.catalog
    except SchemaError:
        return SchemaCatalog({}, root=project.root / "schemas")


def _say_what_was_read(report: AnalyticsReport) -> None:
    span = f"{iso(report.time_range.since_ms)} to {iso(report.time_range.until_ms)}"
    if report.empty:
        click.echo(
            f"no transitions on {report.topic} from {span}"
            + (f" for flow {report.flow}" if report.flow else "")
            + f" ({report.read} record(s) read); the report is empty",
            err=True,
        )
    else:
        summaries = report.analytics.summaries
        click.echo(
            f"{sum(s.transitions for s in summaries):,} transitions of "
            f"{sum(s.workflows for s in summaries):,} workflows on {report.topic} from {span}",
            err=True,
        )
    if report.undecodable:
        first = report.examples[0]
        click.secho(
            f"{report.undecodable} record(s) could not be decoded and were left out "
            f"(first: partition {first.partition} offset {first.offset}: {first.reason})",
            fg="yellow",
            err=True,
        )


def print_tables(tables: list[Table]) -> None:
    """The report's tables on stdout as people read them (durations as ``4h 12m``)."""
    for table in tables:
        click.echo("")
        click.secho(f"{table.title}", bold=True)
        if not table.rows:
            click.echo("  none in this range")
            continue
        print_table(
            [c.header for c in table.columns],
            (
                [human(c.kind, v) for c, v in zip(table.columns, row, strict=True)]
                for row in table.rows
            ),
            right={i for i, c in enumerate(table.columns) if c.numeric},
            indent=2,
        )


class _Reading:
    """The read's progress bar, sized once the range is planned (no bar for an empty one)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bars = ProgressBars()
        self.done = 0
        self.total = 0

    def planned(self, total: int) -> None:
        self.total = total
        if total:
            self.bars.show(self.label, 0, total)

    def read(self, count: int) -> None:
        self.done += count
        if self.total:
            self.bars.show(self.label, self.done, self.total)
