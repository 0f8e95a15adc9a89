"""``sagalog replay``: rebuild and verify the tracker's state from the log; try a flow version.

Both commands read only: a consumer that assigns itself partitions under a group id
of its own and never commits (a shadow of the tracker's group), and a sink that
publishes nothing. The tracker's decision settings (gate secret, retries, admission,
app id, transitions topic) come from its own ``SAGALOG_TRACKER_*`` variables.

Exit codes: ``rebuild`` 0 no mismatch, 1 mismatches or a blob an event refers to
missing or modified (``replay.blobs``), 130 interrupted (run it again to continue);
``whatif`` 0, or 10 with ``--detailed-exitcode`` when a workflow would end
differently; both 2 bad input, 3 Kafka or the registry unreachable.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from sagalog.cli.context import Project, pass_project
from sagalog.cli.progress_bars import ProgressBars
from sagalog.cli.replay_inputs import event_codec, replay_settings, tracker_flows
from sagalog.cli.whatif import whatif


@click.group()
def replay() -> None:
    """Replay the event log: rebuild and verify the tracker's state, or try a flow version."""


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (a plain ``kill``) stops like Ctrl-C: the chunk in progress is dropped."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@replay.command()
@click.option(
    "--store",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A new directory for the rebuilt state (or the one of an interrupted run, to "
    "continue it). Never the tracker's data dir.",
)
@click.option(
    "--app-id",
    metavar="ID",
    help="The live tracker's app id [env SAGALOG_TRACKER_APP_ID; default saga-tracker].",
)
@click.option(
    "--changelog",
    metavar="TOPIC",
    help="The live records to compare with [default <app id>-records-changelog].",
)
@click.option(
    "--transitions-topic",
    metavar="TOPIC",
    help="The tracker's journal [env SAGALOG_TRACKER_TRANSITIONS_TOPIC; default "
    "sagalog.transitions].",
)
@click.option(
    "--flows-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The flows the tracker runs [env SAGALOG_TRACKER_FLOWS_DIR; default topology/flows].",
)
@click.option("--chunk-size", type=click.IntRange(min=1), default=2_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.option("--stop-after", type=int, hidden=True)
@pass_project
def rebuild(
    project: Project,
    store: Path,
    app_id: str | None,
    changelog: str | None,
    transitions_topic: str | None,
    flows_dir: Path | None,
    chunk_size: int,
    as_json: bool,
    quiet: bool,
    stop_after: int | None,
) -> None:
    """Rebuild the tracker's state from the log into a fresh store and diff it with the
    live state; report every mismatch.

    Reads the workflow topics of the flows through the tracker's own processor, with
    nothing published, at the times and with the timer firings the tracker recorded
    on its transitions topic. Then reads the tracker's records changelog to its end
    and compares, per workflow: flow version, state, step, completed steps,
    compensation (cause, in flight, remaining, undone), open gate, pending timers,
    priority and terminal reason. Interrupted (Ctrl-C, kill), it keeps what it did:
    run it again with the same --store to continue.

    \b
    Examples:
      sagalog replay rebuild --store /tmp/rebuild-1
      sagalog replay rebuild --store /tmp/rebuild-1 --json > report.json
    """
    from sagalog.replay.rebuild import Rebuild, rebuild_meta
    from sagalog.replay.store import RebuildStore

    settings = replay_settings(
        app_id=app_id, transitions_topic=transitions_topic, flows_dir=flows_dir
    )
    settings.secret()  # fail before reading anything
    registry = tracker_flows(project, settings)
    topics = sorted({flow.topic for flow in registry})
    bars = ProgressBars()
    with RebuildStore.open(store, meta=rebuild_meta(registry, settings, topics)) as opened:
        job = Rebuild(
            settings=project.settings,
            codec=event_codec(project),
            registry=registry,
            replay=settings,
            store=opened,
            chunk_size=chunk_size,
            progress=None if quiet else lambda p: bars.show(p.phase, p.done, p.total),
            changelog_topic=changelog,
            blobs=project.settings.blob_store(),
        )
        try:
            with _sigterm_interrupts():
                result = job.run(stop_after=stop_after)
                bars.close()
                live = job.read_live()
        except KeyboardInterrupt:
            bars.close()
            opened.discard()
            done = sum(opened.offsets().values())
            click.secho(
                f"interrupted; what was rebuilt is kept in {store} (offsets stored with it, "
                f"{done:,} records in all). Run the same command again to continue.",
                fg="yellow",
                err=True,
            )
            raise click.exceptions.Exit(130) from None
        finally:
            bars.close()
        mismatches = list(job.mismatches(job.partitions()))
    report = _rebuild_report(result, live, mismatches, store, topics, job)
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
    else:
        _print_rebuild(report, job.blobs.lines())
    if mismatches or not job.blobs.whole:
        raise click.exceptions.Exit(1)


def _rebuild_report(
    result: Any, live: int, mismatches: list[Any], store: Path, topics: list[str], job: Any
) -> dict[str, Any]:
    stats = result.stats
    return {
        "store": str(store),
        "resumed": result.resumed,
        "topics": topics,
        "records": result.records,
        "read_now": result.read_now,
        "seconds": round(result.seconds, 3),
        "events_per_s": round(result.events_per_s, 1),
        "tracked": stats.tracked,
        "echoes": stats.echoes,
        "undecodable": {
            "count": stats.unreadable,
            "examples": [
                {"topic": e.topic, "partition": e.partition, "offset": e.offset, "reason": e.reason}
                for e in stats.examples
            ],
        },
        "journal": {
            "topic": job.replay.transitions_topic,
            "records": result.journal_records,
            "undecodable": result.journal_undecodable,
            "missing": result.journal_missing,
        },
        "timers_fired": {
            "recorded": stats.fired_recorded,
            "at_output": stats.fired_at_output,
            "not_reproduced": stats.not_reproduced,
        },
        "outcomes": result.outcomes,
        "would_publish": {"events": result.would_publish, "alerts": result.would_alert},
        "workflows": {"rebuilt": result.workflows, "live": live},
        "changelog": job.changelog_topic,
        "mismatches": [m.to_json() for m in mismatches],
        "blobs": job.blobs.to_json(),
    }


def _print_rebuild(report: dict[str, Any], blob_lines: list[tuple[str, bool]]) -> None:
    echo = click.echo
    resumed = " (continued from an earlier run)" if report["resumed"] else ""
    echo(
        f"rebuilt {report['workflows']['rebuilt']:,} workflows from {report['records']:,} "
        f"records of {', '.join(report['topics'])}{resumed}"
    )
    if report["read_now"]:
        echo(
            f"  this run: {report['read_now']:,} records in {report['seconds']:.1f} s "
            f"({report['events_per_s']:,.0f} records/s)"
        )
    journal = report["journal"]
    if journal["missing"]:
        click.secho(
            f"  no journal: {journal['missing']}; without the tracker's transitions the "
            "rebuild cannot know when it decided or which timers fired",
            fg="yellow",
        )
    else:
        echo(f"  journal: {journal['records']:,} records of {journal['topic']}")
    fired = report["timers_fired"]
    echo(
        f"  timers fired where the tracker fired them: {fired['recorded']:,} from the journal, "
        f"{fired['at_output']:,} where their output was read back"
    )
    if fired["not_reproduced"]:
        click.secho(
            f"  {len(fired['not_reproduced'])} timer(s) that moved a workflow live did not in "
            f"the replay (first: {fired['not_reproduced'][0]})",
            fg="yellow",
        )
    undecodable = report["undecodable"]
    if undecodable["count"]:
        first = undecodable["examples"][0]
        click.secho(
            f"  {undecodable['count']} record(s) unreadable, left out as the tracker leaves "
            f"them (first: {first['topic']}/{first['partition']}@{first['offset']}: "
            f"{first['reason']})",
            fg="yellow",
        )
    if report["records"] == 0:
        echo("  the workflow topics hold no events: nothing to rebuild")
    echo(f"  live: {report['workflows']['live']:,} records in {report['changelog']}")
    for line, problem in blob_lines:
        click.secho(line, fg="yellow" if problem else None)
    mismatches = report["mismatches"]
    if not mismatches:
        click.secho("no mismatches", fg="green")
        return
    click.secho(f"{len(mismatches)} mismatch(es):", fg="red")
    for m in mismatches:
        if m["field"] == "(record)":
            if m["live"] is None:
                echo(f"  {m['workflow_id']}  missing in the live state (rebuilt: {m['rebuilt']})")
            else:
                echo(f"  {m['workflow_id']}  missing in the rebuilt state (live: {m['live']})")
        else:
            echo(
                f"  {m['workflow_id']}  {m['field']}: live {m['live']!r}, rebuilt {m['rebuilt']!r}"
            )


replay.add_command(whatif)
