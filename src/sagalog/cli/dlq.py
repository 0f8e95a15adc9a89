"""``sagalog dlq``: the records no handler could process, and re-driving them after a fix.

Through the gateway, like ``sagalog workflows cancel``: a replay is an operator's act,
so the gateway records who asked and why (``DeadLetterReplayed``) in the workflow's
audit trail before it sends the record back. Exit codes: 0 done, 2 the gateway refused
the request (its message says why: an unknown position, one replayed already), 3 the
gateway is unreachable or not ready.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import urllib.parse
from typing import Any

import click

from sagalog.cli.gateway_commands import connect, gateway_of, gateway_options, when
from sagalog.cli.tables import print_fields, print_table
from sagalog.durations import positive_duration_ms
from sagalog.errors import EventValidationError
from sagalog.position import RecordPosition


def since_time(text: str, *, now: dt.datetime) -> dt.datetime:
    """``--since``: a duration back from ``now`` (``90m``, ``2d``) or an ISO 8601 time
    (UTC when it names no zone).

    Raises:
        ValueError: neither, with what to write instead.
    """
    try:
        return now - dt.timedelta(milliseconds=positive_duration_ms(text))
    except ValueError:
        pass
    try:
        at = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"'{text}' is neither a duration (90m, 2d) nor an ISO 8601 time (2027-01-15T08:00:00Z)"
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


def _position(text: str) -> str:
    """The position as the gateway's path takes it, refused here when it cannot be one."""
    try:
        return urllib.parse.quote(str(RecordPosition.parse(text)), safe="/")
    except EventValidationError:
        raise click.BadParameter(
            f"'{text}' is not topic/partition/offset; copy it from `sagalog dlq list` "
            "(e.g. sagalog.deadletter/0/42)",
            param_hint="POSITION",
        ) from None


def _replays(letter: dict[str, Any]) -> str:
    replays = letter["replays"]
    return f"yes ({len(replays)})" if replays else "no"


def _short_type(event_type: str | None) -> str:
    return (event_type or "-").rsplit(".", 1)[-1]


@click.group()
@gateway_options
@click.pass_context
def dlq(ctx: click.Context, gateway_url: str | None, api_key: str | None) -> None:
    """Dead letters: list them, show one whole, replay one after its handler is fixed."""
    connect(ctx, gateway_url, api_key)


@dlq.command("list")
@click.option("--topic", help="Only this dead-letter topic [default: all of them].")
@click.option("--agent", help="Only those this agent (or tracker app id) dead-lettered.")
@click.option(
    "--since",
    metavar="WHEN",
    help="Only those dead-lettered since: a duration back (2h, 7d) or an ISO 8601 time.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=1000,
    show_default=True,
    help="The newest this many.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the gateway's JSON answer.")
@click.pass_context
def list_dead_letters(
    ctx: click.Context,
    topic: str | None,
    agent: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """List the dead letters, oldest first: where each lies, when and by whom it was
    dead-lettered, why, its event and workflow, and whether it was replayed."""
    after = None
    if since is not None:
        try:
            after = since_time(since, now=dt.datetime.now(dt.UTC)).isoformat()
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--since") from None
    answer = gateway_of(ctx).get(
        "/v1/dead-letters", topic=topic, agent=agent, since=after, limit=limit
    )
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    letters = answer["dead_letters"]
    if not letters:
        click.echo(f"no dead letters in {', '.join(answer['topics'])}", err=True)
        return
    rows = [
        [
            d["position"],
            when(d["dead_lettered_at"]),
            d["dead_lettered_by"] or "-",
            _short_type(d["event_type"]),
            d["workflow_id"] or "-",
            _replays(d),
            d["reason"].splitlines()[0][:60] if d["reason"] else "-",
        ]
        for d in letters
    ]
    print_table(["POSITION", "WHEN", "BY", "EVENT", "WORKFLOW", "REPLAYED", "REASON"], rows)


@dlq.command("show")
@click.argument("position")
@click.option("--json", "as_json", is_flag=True, help="Print the gateway's JSON answer.")
@click.pass_context
def show_dead_letter(ctx: click.Context, position: str, as_json: bool) -> None:
    """Show the dead letter at POSITION (topic/partition/offset, from `sagalog dlq list`)
    whole: why (reason, error class, stack, attempts), where from, the event decoded."""
    d = gateway_of(ctx).get(f"/v1/dead-letters/{_position(position)}")
    if as_json:
        click.echo(json.dumps(d, indent=2))
        return
    replays = d["replays"]
    print_fields(
        [
            ("dead letter", d["position"]),
            ("origin", f"{d['origin']} (a replay goes there)"),
            ("when", when(d["dead_lettered_at"])),
            ("by", f"{d['dead_lettered_by'] or '-'} after {d['attempts']} attempt(s)"),
            ("error", d["error_class"] or "-"),
            ("reason", d["reason"] or "-"),
            ("event", f"{d['event_type'] or '-'} {d['event_id'] or ''}".rstrip()),
            ("workflow", d["workflow_id"] or "-"),
            ("replays", "none" if not replays else ""),
        ]
    )
    for replay in replays:
        click.echo(f"  event {replay['event_id']} at {replay['position']}")
    click.echo("\nheaders")
    for name, value in sorted(d["headers"].items()):
        if name != "sagalog_dlq_stack":
            click.echo(f"  {name} = {value}")
    if d["payload_error"]:
        click.echo(f"\npayload: does not decode ({d['payload_error']})")
    else:
        click.echo("\npayload")
        click.echo("  " + json.dumps(d["payload"], indent=2).replace("\n", "\n  "))
    if d["stack"]:
        click.echo("\nstack")
        click.echo("  " + d["stack"].rstrip().replace("\n", "\n  "))


@dlq.command("replay")
@click.argument("position")
@click.option("--reason", required=True, help="Why (what was fixed); kept in the audit.")
@click.option("--by", "requested_by", help="Who asks [default: the login name].")
@click.option(
    "--again", is_flag=True, help="Replay a dead letter that was replayed before, once more."
)
@click.pass_context
def replay_dead_letter(
    ctx: click.Context, position: str, reason: str, requested_by: str | None, again: bool
) -> None:
    """Re-drive the dead letter at POSITION to the topic it was first consumed from,
    as a new event (a new ce_id, and a sagalog_replay_of header naming POSITION), once
    its handler is fixed. The workflow's audit trail keeps who asked and why
    (DeadLetterReplayed). A dead letter replayed before is refused unless --again."""
    answer = gateway_of(ctx).post(
        f"/v1/dead-letters/{_position(position)}/replay",
        {"reason": reason, "requested_by": requested_by or getpass.getuser(), "again": again},
    )
    click.echo(
        f"replayed {answer['dead_letter']} (replay {answer['replay']}) of workflow "
        f"{answer['workflow_id']} as event {answer['replay_event_id']} to "
        f"{answer['replayed_to']}; audited as {answer['event_type'].rsplit('.', 1)[-1]} "
        f"{answer['event_id']} on {answer['topic']}[{answer['partition']}]@{answer['offset']}"
    )
