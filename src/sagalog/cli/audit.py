"""``sagalog audit``: one workflow's complete history, read from the log, and verified.

Exit codes: 0 the history was shown (with ``--verify``: and nothing was found), 1
``--verify`` found a modified, missing or reordered event, or a blob not as written
(``audit.blobs``), 2 bad input (an unknown
workflow id, a missing topic, a malformed ``--from-topic``), 3 Kafka or the registry
unreachable.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

import click

from sagalog.audit import (
    ReadStats,
    Sources,
    WorkflowSeal,
    audit_consumer,
    collect,
    find_workflow,
    parse_substitutes,
    to_json,
    to_text,
)
from sagalog.audit.collect import verify_collected
from sagalog.cli.context import Project, pass_project
from sagalog.cli.gateway_client import (
    GatewayClient,
    GatewayClientSettings,
    GatewayFailed,
    GatewayRefused,
)
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.personal.cipher import personal_data
from sagalog.topic_names import records_changelog
from sagalog.tracker import TRANSITIONS_TOPIC


@click.command()
@click.argument("workflow_id")
@click.option("--json", "as_json", is_flag=True, help="Print the trail as JSON.")
@click.option(
    "--verify",
    "check",
    is_flag=True,
    help="Check every event against its hash and what the tracker sealed, and every blob "
    "it refers to against its hash (SAGALOG_BLOB_DIR or SAGALOG_BLOB_URL); exit 1 on a "
    "modified, missing or reordered event or blob.",
)
@click.option(
    "--from-topic",
    "substitutes",
    multiple=True,
    metavar="ORIGINAL=COPY",
    help="Read COPY (whole, matched by event id) instead of ORIGINAL: verify a copied or "
    "restored log. Repeatable.",
)
@click.option(
    "--tracker-app-id",
    default="saga-tracker",
    show_default=True,
    help="The tracker whose records changelog holds the workflow.",
)
@click.option(
    "--transitions-topic",
    default=TRANSITIONS_TOPIC,
    show_default=True,
    help="The tracker's transitions topic.",
)
@click.option("--no-transitions", is_flag=True, help="Leave the tracker's transitions out.")
@click.option(
    "--gateway-url",
    metavar="URL",
    help="Read the record from the gateway [env SAGALOG_GATEWAY_URL]; used when an API key "
    "is set, else the records changelog is read.",
)
@click.option("--api-key", metavar="KEY", help="Gateway API key [env SAGALOG_GATEWAY_API_KEY]")
@click.option("--no-gateway", is_flag=True, help="Read the record from the changelog only.")
@pass_project
def audit(
    project: Project,
    workflow_id: str,
    as_json: bool,
    check: bool,
    substitutes: tuple[str, ...],
    tracker_app_id: str,
    transitions_topic: str,
    no_transitions: bool,
    gateway_url: str | None,
    api_key: str | None,
    no_gateway: bool,
) -> None:
    """Show WORKFLOW_ID's history: every event with its headers, causes, gate decisions
    (who, when) and model decisions (lineage), and the tracker's transitions.

    The events are fetched at the positions the tracker sealed in the workflow's
    record (from the gateway, or the one records-changelog partition of the key), so
    the topic is never scanned.

    \b
    Examples:
      sagalog audit po-2026-0042
      sagalog audit po-2026-0042 --json
      sagalog audit po-2026-0042 --verify --from-topic procurement.events=restored.events
    """
    settings = project.settings
    mapping = parse_substitutes(substitutes)
    stats = ReadStats()
    started = time.monotonic()
    consumer = audit_consumer(settings)
    try:
        notes: list[str] = []
        workflow = None
        if not no_gateway:
            workflow = _from_gateway(workflow_id, gateway_url, api_key, notes)
        if workflow is None:
            workflow = find_workflow(
                consumer,
                workflow_id,
                changelog=records_changelog(tracker_app_id),
                timeout_s=settings.connect_timeout_s,
                stats=stats,
            )
        codec = EventCodec(
            catalog=project.catalog,
            registry=SchemaRegistry(settings),
            personal=personal_data(settings, reveal=True),
        )
        collected = collect(
            consumer,
            codec,
            workflow,
            sources=Sources(
                transitions_topic=None if no_transitions else transitions_topic,
                substitutes=mapping,
            ),
            timeout_s=settings.connect_timeout_s,
            stats=stats,
            notes=notes,
        )
    finally:
        consumer.close()
    stats.seconds = time.monotonic() - started
    verification = None
    if check:
        verification = verify_collected(collected, settings.blob_store())
    if as_json:
        body = to_json(collected.trail, verification=verification, stats=stats)
        click.echo(json.dumps(body, indent=2, ensure_ascii=False))
    else:
        click.echo(to_text(collected.trail, verification=verification, stats=stats))
    if verification is not None and not verification.ok:
        raise click.exceptions.Exit(1)


def _from_gateway(
    workflow_id: str, url: str | None, api_key: str | None, notes: list[str]
) -> WorkflowSeal | None:
    """The workflow from the gateway's read model, when one is configured and knows it.

    The changelog is the authority: a gateway that is unreachable, lags (404), or is
    older than sealing only costs a note, and the changelog is read instead.
    """
    overrides: dict[str, Any] = {}
    if url:
        overrides["url"] = url
    if api_key:
        overrides["api_key"] = api_key
    client_settings = GatewayClientSettings(**overrides)
    if client_settings.api_key is None:
        return None
    client = GatewayClient(client_settings)
    try:
        detail = client.get(f"/v1/workflows/{urllib.parse.quote(workflow_id, safe='')}")
    except GatewayRefused as exc:
        if exc.status != 404:
            notes.append(f"the gateway refused ({exc}); read the records changelog instead")
        return None
    except GatewayFailed as exc:
        notes.append(f"{exc}; read the records changelog instead")
        return None
    if not isinstance(detail, dict) or "seal" not in detail:
        notes.append("the gateway does not serve sealed positions; read the changelog instead")
        return None
    return WorkflowSeal.from_gateway(detail, source=f"gateway {client.base}")
