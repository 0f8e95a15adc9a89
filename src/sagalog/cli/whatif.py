"""``sagalog replay whatif``: which recorded workflows a candidate flow version would change.

See ``sagalog.replay.whatif`` for how, and ``sagalog.replay.assumptions`` for what an
entry the recording never reached is taken to do. Exit codes: 0, or 10 with
``--detailed-exitcode`` when a workflow would end differently; 1 a blob an event refers
to is missing or modified (``replay.blobs``); 2 bad input (a flow file, an assumption,
the gate secret), 3 Kafka or the registry unreachable.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import click

from sagalog.cli.context import Project, pass_project
from sagalog.cli.replay_inputs import event_codec, replay_settings, tracker_flows
from sagalog.cli.tables import print_table


@click.command()
@click.option(
    "--candidate",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The flow version to try (a topology/flows/<flow>.v<N>.yaml, deployed or not).",
)
@click.option(
    "--assume",
    "assume",
    multiple=True,
    metavar="NAME=SPEC",
    help="What an entry the recording never reached does: STEP=10m, STEP=fail[@10m], "
    "STEP=never, GATE=approve[@2h], GATE=reject[@2h], GATE=never, STEP.undo=30m. "
    "Default: steps complete and gates approve at once.",
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
    help="The recorded versions [env SAGALOG_TRACKER_FLOWS_DIR; default topology/flows].",
)
@click.option("--all", "show_all", is_flag=True, help="List unchanged workflows too.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 10 when some workflow would end differently (for CI).",
)
@pass_project
def whatif(
    project: Project,
    candidate: Path,
    assume: tuple[str, ...],
    transitions_topic: str | None,
    flows_dir: Path | None,
    show_all: bool,
    as_json: bool,
    detailed_exitcode: bool,
) -> None:
    """Which recorded workflows would end differently under a candidate flow version.

    Runs every recorded workflow of the candidate's flow through the version it ran
    under and through the candidate, with the tracker's own decision code on a
    simulated clock: each recorded answer (a completion, a gate decision, an undo)
    comes as long after its step or gate starts as it did in the recording. Compares
    the end state, the compensations requested, the tracker's alerts and the SLA
    rules the workflow's own spans exceed. Reads only (a shadow consumer group that
    never commits); publishes nothing.

    \b
    Examples:
      sagalog replay whatif --candidate topology/flows/procurement.v2.yaml
      sagalog replay whatif --candidate orders.v2.yaml --assume check_vendor=6h --json
    """
    from sagalog.flows.loader import load_flow_file
    from sagalog.replay.assumptions import parse_assumptions
    from sagalog.replay.whatif import read_recording, shadow_group_id, what_if

    settings = replay_settings(transitions_topic=transitions_topic, flows_dir=flows_dir)
    secret = settings.secret()
    flow = load_flow_file(candidate, catalog=project.catalog, topology=project.topology)
    assumed = parse_assumptions(assume, flow)
    registry = tracker_flows(project, settings)
    group_id = shadow_group_id(flow)
    recording = read_recording(
        project.settings,
        event_codec(project),
        topic=flow.topic,
        transitions_topic=settings.transitions_topic,
        flow_name=flow.name,
        group_id=group_id,
        blobs=project.settings.blob_store(),
    )
    report = what_if(
        recording,
        candidate=flow,
        registry=registry,
        secret=secret,
        retry=settings.retry(),
        assumed=assumed,
        group_id=group_id,
    )
    if as_json:
        click.echo(json.dumps(_whatif_json(report, candidate), indent=2))
    else:
        _print_whatif(report, candidate, show_all)
    if not recording.blobs.whole:
        raise click.exceptions.Exit(1)
    if detailed_exitcode and report.changed:
        raise click.exceptions.Exit(10)


def _whatif_json(report: Any, source: Path) -> dict[str, Any]:
    recording = report.recording
    return {
        "candidate": {"flow": report.candidate.name, "version": report.candidate.version},
        "source": str(source),
        "topic": recording.topic,
        "shadow_group": report.group_id,
        "records": recording.records,
        "undecodable": {
            "count": recording.unreadable,
            "examples": [
                {"topic": e.topic, "partition": e.partition, "offset": e.offset, "reason": e.reason}
                for e in recording.examples
            ],
        },
        "horizon_ms": recording.horizon_ms,
        "assumed": {name: str(a) for name, a in report.assumed.items()},
        "workflows": len(report.outcomes),
        "changed": [o.to_json() for o in report.changed],
        "not_reproduced": [o.to_json() for o in report.not_reproduced],
        "skipped": report.skipped,
        "blobs": recording.blobs.to_json(),
    }


def _print_whatif(report: Any, source: Path, show_all: bool) -> None:
    recording, flow = report.recording, report.candidate
    versions: dict[int, int] = {}
    for outcome in report.outcomes:
        versions[outcome.recorded_version] = versions.get(outcome.recorded_version, 0) + 1
    ran = ", ".join(f"v{v}: {n}" for v, n in sorted(versions.items())) or "none"
    click.echo(
        f"what-if {flow.label} ({source}) against {len(report.outcomes)} recorded workflows of "
        f"{recording.topic} ({ran})"
    )
    horizon = dt.datetime.fromtimestamp(recording.horizon_ms / 1000, dt.UTC)
    click.echo(
        f"  read {recording.records:,} records in shadow group {report.group_id}; nothing "
        f"published; horizon {horizon.isoformat(timespec='seconds')} (end of the recording)"
    )
    assumed = ", ".join(f"{name}={a}" for name, a in report.assumed.items())
    click.echo(
        f"  assumed: {assumed + '; ' if assumed else ''}other unrecorded steps complete and "
        "gates approve at once"
    )
    if recording.unreadable:
        first = recording.examples[0]
        click.secho(
            f"  {recording.unreadable} unreadable record(s) left out (first: "
            f"{first.partition}@{first.offset}: {first.reason})",
            fg="yellow",
        )
    for why, ids in report.skipped.items():
        click.secho(f"  {len(ids)} workflow(s) skipped: {why} (first: {ids[0]})", fg="yellow")
    for line, problem in recording.blobs.lines():
        click.secho(line, fg="yellow" if problem else None)
    if report.not_reproduced:
        ids = ", ".join(o.workflow_id for o in report.not_reproduced[:5])
        click.secho(
            f"  {len(report.not_reproduced)} workflow(s) whose recorded version, simulated, does "
            f"not end in its recorded state (their comparison is less certain): {ids}",
            fg="yellow",
        )
    if not report.outcomes:
        click.echo("no recorded workflows of this flow: nothing to compare")
        return
    rows = report.outcomes if show_all else report.changed
    click.echo("")
    if report.changed:
        click.secho(
            f"{len(report.changed)} of {len(report.outcomes)} workflows would end differently:",
            bold=True,
        )
    else:
        click.secho(f"none of {len(report.outcomes)} workflows would end differently", bold=True)
    if not rows:
        return
    table = [
        [o.workflow_id, o.baseline.summary(), o.candidate.summary(), ", ".join(o.changes) or "-"]
        for o in rows
    ]
    header = ["workflow", "recorded version", f"candidate v{flow.version}", "changed"]
    print_table(header, table, indent=2)
