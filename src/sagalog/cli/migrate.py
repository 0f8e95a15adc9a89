"""``sagalog flows migrate``: move running workflows to a later flow version, dry run first.

The dry run reads every workflow's current record from the tracker's records
changelog and runs ``sagalog.tracker.migration.plan_migration`` on each: the workflows
that would move (and how: their entry, timers, what a failure would then undo) and
those refused, with every reason. ``--apply`` publishes one
``sagalog.v1.WorkflowMigrated`` per workflow that would move, naming the state and
entry the dry run saw; the tracker decides each with the same rule, so it does what
the dry run listed, or refuses (with an alert) a workflow that moved on meanwhile.
Exit codes: 0; 2 bad input (an unknown version, a wrong --map or --where); 3 Kafka or
the registry unreachable.
"""

from __future__ import annotations

import getpass
import json
import uuid
from collections.abc import Iterable
from typing import Any

import click

from sagalog.cli.context import Project, pass_project
from sagalog.cli.replay_inputs import replay_settings, tracker_flows
from sagalog.errors import ConfigurationError, FlowDefinitionError
from sagalog.events import WorkflowMigrated
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.publisher import EventPublisher
from sagalog.replay.live import read_live_records
from sagalog.tracker.migration import Migrated, Refused, check_mapping, plan_migration
from sagalog.tracker.record import WorkflowRecord

_MIGRATIONS = uuid.UUID("7c1d2e3f-4a5b-5c6d-8e7f-9a0b1c2d3e4f")
_WHERE = ("state", "current")


@click.command()
@click.option("--flow", "flow_name", required=True, help="The flow whose workflows move.")
@click.option("--from", "from_version", type=int, required=True, help="The version they run.")
@click.option("--to", "to_version", type=int, required=True, help="The version to move them to.")
@click.option(
    "--map",
    "mappings",
    multiple=True,
    metavar="OLD=NEW",
    help="An entry renamed in the new version (repeat); the others keep their names.",
)
@click.option(
    "--where",
    "wheres",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Only workflows with state=<state> or current=<entry> (repeat: all must hold).",
)
@click.option("--apply", "apply_", is_flag=True, help="Publish the migrations (default: dry run).")
@click.option("--by", "requested_by", help="Who asks, for the audit (default: the OS user).")
@click.option("--app-id", help="The tracker's app id [env SAGALOG_TRACKER_APP_ID].")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON on stdout.")
@pass_project
def migrate(
    project: Project,
    flow_name: str,
    from_version: int,
    to_version: int,
    mappings: tuple[str, ...],
    wheres: tuple[str, ...],
    apply_: bool,
    requested_by: str | None,
    app_id: str | None,
    as_json: bool,
) -> None:
    """Move running workflows of FLOW from one version to a later one.

    \b
    Examples:
      sagalog flows migrate --flow procurement --from 1 --to 2 --map score_risk=assess_risk
      sagalog flows migrate --flow procurement --from 1 --to 2 --where state=running --apply
    """
    settings = replay_settings(app_id=app_id)
    registry = tracker_flows(project, settings)
    try:
        old, new = registry.get(flow_name, from_version), registry.get(flow_name, to_version)
    except FlowDefinitionError as exc:
        raise ConfigurationError(f"{exc}; both versions must be in the flows folder") from None
    mapping = _pairs(mappings, "--map", "OLD=NEW")
    where = _pairs(wheres, "--where", "FIELD=VALUE")
    problems = check_mapping(mapping, old=old, new=new) + _where_problems(where)
    if problems:
        raise ConfigurationError("\n".join(problems))
    records = read_live_records(project.settings, settings.changelog_topic)
    chosen = [r for r in _in_flight(records.values(), old) if _matches(r, where)]
    plans = [plan_migration(r, old=old, new=new, mapping=mapping) for r in chosen]
    moving = [p for p in plans if isinstance(p, Migrated)]
    refused = [p for p in plans if isinstance(p, Refused)]
    migration_id = str(uuid.uuid4())
    if apply_ and moving:
        _publish(project, old, new, mapping, moving, migration_id, requested_by)
    report = _report(old, new, mapping, moving, refused, applied=apply_, migration_id=migration_id)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        _print(report)


def _pairs(given: Iterable[str], option: str, form: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ConfigurationError(f"{option} {item!r}: expected {form}")
        pairs[key] = value
    return pairs


def _where_problems(where: dict[str, str]) -> list[str]:
    problems = [
        f"--where {k}=...: filter by {' or '.join(_WHERE)}" for k in where if k not in _WHERE
    ]
    state = where.get("state")
    if state is not None and state not in {s.value for s in WorkflowState}:
        names = ", ".join(s.value for s in WorkflowState)
        problems.append(f"--where state={state}: not a state ({names})")
    return problems


def _in_flight(records: Iterable[WorkflowRecord], old: Flow) -> list[WorkflowRecord]:
    return sorted(
        (
            r
            for r in records
            if (r.flow, r.flow_version) == (old.name, old.version) and not r.is_terminal
        ),
        key=lambda r: r.workflow_id,
    )


def _matches(record: WorkflowRecord, where: dict[str, str]) -> bool:
    if "state" in where and record.state.value != where["state"]:
        return False
    return "current" not in where or record.current == where["current"]


def _publish(
    project: Project,
    old: Flow,
    new: Flow,
    mapping: dict[str, str],
    moving: list[Migrated],
    migration_id: str,
    requested_by: str | None,
) -> None:
    by = requested_by or getpass.getuser()
    publisher = EventPublisher(project.settings, catalog=project.catalog, source="sagalog/cli")
    try:
        for plan in moving:
            before = plan.before
            event = WorkflowMigrated(
                flow=old.name,
                from_version=old.version,
                to_version=new.version,
                mapping=mapping,
                expected_state=before.state.value,
                expected_current=before.current,
                migration_id=migration_id,
                requested_by=by,
            )
            publisher.publish_event(
                old.topic,
                event,
                workflow_id=before.workflow_id,
                flow_version=old.version,
                event_id=str(uuid.uuid5(_MIGRATIONS, f"{migration_id}\x1f{before.workflow_id}")),
                priority=before.priority.name,
                traceparent=before.traceparent,  # the migration joins the workflow's trace
            )
    finally:
        publisher.close()


def _report(
    old: Flow,
    new: Flow,
    mapping: dict[str, str],
    moving: list[Migrated],
    refused: list[Refused],
    *,
    applied: bool,
    migration_id: str,
) -> dict[str, Any]:
    return {
        "flow": old.name,
        "from_version": old.version,
        "to_version": new.version,
        "mapping": mapping,
        "applied": applied,
        "migration_id": migration_id if applied else None,
        "migrate": [
            {
                "workflow_id": p.workflow_id,
                "state": p.record.state.value,
                "current_before": p.before.current,
                "current_after": p.record.current,
                "completed": list(p.record.completed_names),
                "timers": [
                    {"kind": t.kind.value, "ref": t.ref, "due_ms": t.due_ms} for t in p.timers
                ],
                "compensations_if_it_fails": list(p.compensations),
            }
            for p in moving
        ],
        "refused": [{"workflow_id": r.workflow_id, "reasons": list(r.reasons)} for r in refused],
    }


def _print(report: dict[str, Any]) -> None:
    label = f"{report['flow']} v{report['from_version']} -> v{report['to_version']}"
    moving, refused = report["migrate"], report["refused"]
    verb = "published for" if report["applied"] else "would move"
    click.echo(f"{label}: {len(moving)} workflow(s) {verb}, {len(refused)} refused")
    for item in moving:
        where = item["current_before"]
        renamed = f" -> {item['current_after']}" if item["current_after"] != where else ""
        timers = ", ".join(f"{t['kind']}:{t['ref']}@{t['due_ms']}" for t in item["timers"])
        undo = ", ".join(item["compensations_if_it_fails"]) or "nothing"
        click.echo(
            f"  move    {item['workflow_id']}: {item['state']} at {where}{renamed}; "
            f"timers {timers}; a failure would undo {undo}"
        )
    for item in refused:
        click.echo(f"  refuse  {item['workflow_id']}: {'; '.join(item['reasons'])}")
    if report["applied"]:
        click.echo(
            f"migration {report['migration_id']}: the tracker applies each (a workflow that "
            "moved on since is refused with a migration_refused alert)"
        )
    elif moving:
        click.echo("dry run: nothing published; add --apply to migrate these")
