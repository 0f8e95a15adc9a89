"""``sagalog publish`` and ``sagalog tail``: the first touch of a topic."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sagalog.cli.context import Project, pass_project
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import H_HASH, header_dict
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import EventValidationError
from sagalog.personal.cipher import personal_data
from sagalog.publisher import EventPublisher
from sagalog.tail import tail


@click.command()
@click.argument("topic")
@click.argument("event_type")
@click.argument("payload", metavar="JSON")
@click.option("--workflow-id", help="The workflow (and record key); a new id when omitted.")
@click.option("--causation-id", help="The id of the event this one reacts to.")
@click.option(
    "--correlation-id", help="Shared by a business transaction; defaults to the workflow id."
)
@click.option("--flow-version", type=int, help="The flow version the workflow runs under.")
@click.option("--source", default="sagalog/cli", show_default=True, help="The ce_source header.")
@pass_project
def publish(
    project: Project,
    topic: str,
    event_type: str,
    payload: str,
    workflow_id: str | None,
    causation_id: str | None,
    correlation_id: str | None,
    flow_version: int | None,
    source: str,
) -> None:
    """Validate JSON against EVENT_TYPE's schema and publish it to TOPIC.

    JSON is the payload itself, or @file to read it from a file. Prints where the
    event landed, with its headers, as one JSON line.

    \b
    Example:
      sagalog publish procurement.events procurement.v1.BudgetReleased \\
        '{"reservation_id": "r-1", "reason": "request rejected"}'
    """
    text = Path(payload[1:]).read_text() if payload.startswith("@") else payload
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EventValidationError(
            f"payload is not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from exc
    publisher = EventPublisher(project.settings, catalog=project.catalog, source=source)
    published = publisher.publish(
        topic,
        event_type,
        data,
        workflow_id=workflow_id,
        causation_id=causation_id,
        correlation_id=correlation_id,
        flow_version=flow_version,
    )
    click.echo(
        json.dumps(
            {
                "topic": published.topic,
                "partition": published.partition,
                "offset": published.offset,
                "headers": {
                    **header_dict(published.headers.to_kafka()),
                    **({H_HASH: published.content_hash} if published.content_hash else {}),
                },
            }
        )
    )


@click.command("tail")
@click.argument("topic")
@click.option(
    "--from-beginning/--from-end",
    default=True,
    show_default=True,
    help="Start at the oldest record or only show new ones.",
)
@click.option("-n", "--max", "max_records", type=int, help="Stop after this many records.")
@click.option(
    "--idle-timeout",
    type=float,
    help="Stop after this many seconds without a record (default: follow forever).",
)
@click.option(
    "--workflow",
    "workflow_id",
    metavar="ID",
    help="Only this workflow's events (filtered on the ce_workflowid header).",
)
@pass_project
def tail_command(
    project: Project,
    topic: str,
    from_beginning: bool,
    max_records: int | None,
    idle_timeout: float | None,
    workflow_id: str | None,
) -> None:
    """Print TOPIC's events, decoded, with their headers, as JSON lines.

    Reads committed records only and joins no consumer group, so it never moves a
    service's offsets. Records that do not decode are printed with an "error" field.
    """
    codec = EventCodec(
        catalog=project.catalog,
        registry=SchemaRegistry(project.settings),
        personal=personal_data(project.settings, reveal=True),
    )
    for record in tail(
        project.settings,
        codec,
        topic,
        from_beginning=from_beginning,
        max_records=max_records,
        idle_timeout_s=idle_timeout,
        workflow_id=workflow_id,
    ):
        click.echo(json.dumps(record.to_json(), ensure_ascii=False))
