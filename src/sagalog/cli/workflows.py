"""``sagalog workflows`` and ``sagalog gates``: look at workflows and decide gates.

Both talk to the gateway over HTTP (``SAGALOG_GATEWAY_URL``, ``SAGALOG_GATEWAY_API_KEY``).
Exit codes: 0 done, 2 the gateway refused the request (its message says why), 3 the
gateway is unreachable or not ready.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import urllib.parse
from collections import Counter

import click

from sagalog.cli.gateway_commands import connect, gateway_of, gateway_options, when
from sagalog.cli.tables import print_fields, print_table
from sagalog.durations import format_duration, positive_duration_ms
from sagalog.flows.states import TERMINAL_STATES, WorkflowState

STATES = tuple(state.value for state in WorkflowState)
TERMINAL = frozenset(state.value for state in TERMINAL_STATES)


@click.group()
@gateway_options
@click.pass_context
def workflows(ctx: click.Context, gateway_url: str | None, api_key: str | None) -> None:
    """Workflows as the gateway sees them: state, history, timers, open gate."""
    connect(ctx, gateway_url, api_key)


@workflows.command("list")
@click.option("--state", type=click.Choice(STATES), help="Only workflows in this state.")
@click.option("--flow", help="Only workflows of this flow.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--after", metavar="ID", help="Start after this workflow id (the next page).")
@click.option("--json", "as_json", is_flag=True, help="Print the gateway's JSON answer.")
@click.pass_context
def list_workflows(
    ctx: click.Context,
    state: str | None,
    flow: str | None,
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    """List workflows, optionally in one state or of one flow."""
    answer = gateway_of(ctx).get("/v1/workflows", state=state, flow=flow, limit=limit, after=after)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    rows = [
        [
            w["workflow_id"],
            f"{w['flow']} v{w['flow_version']}",
            w["state"],
            w["current"] or "-",
            when(w["entered_state_at"]),
        ]
        for w in answer["workflows"]
    ]
    if not rows:
        click.echo("no workflows match", err=True)
        return
    print_table(["WORKFLOW", "FLOW", "STATE", "CURRENT", "SINCE"], rows)
    if answer.get("next_after"):
        click.echo(f"(more: --after {answer['next_after']})", err=True)


@workflows.command("show")
@click.argument("workflow_id")
@click.option("--json", "as_json", is_flag=True, help="Print the gateway's JSON answer.")
@click.pass_context
def show_workflow(ctx: click.Context, workflow_id: str, as_json: bool) -> None:
    """Show one workflow: state, history, pending timers and the open gate."""
    w = gateway_of(ctx).get(f"/v1/workflows/{urllib.parse.quote(workflow_id, safe='')}")
    if as_json:
        click.echo(json.dumps(w, indent=2))
        return
    fields = [
        ("workflow", w["workflow_id"]),
        ("flow", f"{w['flow']} v{w['flow_version']} ({w['priority']} priority)"),
        ("state", w["state"] + (f" at {w['current']}" if w["current"] else "")),
        ("since", f"{when(w['entered_state_at'])} (started {when(w['started_at'])})"),
    ]
    if w["terminal_reason"]:
        fields.append(("reason", w["terminal_reason"]))
    if w.get("trace_id"):
        fields.append(("trace", w["trace_id"]))
    if w["completed"]:
        fields.append(("done", ", ".join(w["completed"])))
    print_fields(fields)
    gate = w["open_gate"]
    if gate:
        click.echo(
            f"\nopen gate {gate['gate']}: assignee {gate['assignee']} (level "
            f"{gate['escalation_level']}), deadline {when(gate['deadline'])}\n"
            f"  token   {gate['token']}\n"
            f"  decide  sagalog gates approve|reject {gate['token']} --workflow "
            f"{w['workflow_id']}"
        )
    compensation = w["compensation"]
    if compensation:
        click.echo(
            f"\ncompensating ({compensation['cause']}): {compensation['reason']}; in flight "
            f"{compensation['in_flight'] or '-'}, undone {', '.join(compensation['undone']) or '-'}"
        )
    click.echo("\npending timers" + ("" if w["pending_timers"] else ": none"))
    for timer in w["pending_timers"]:
        click.echo(f"  {when(timer['due'])}  {timer['kind']}  {timer['ref']}")
    click.echo("\nhistory" + ("" if w["history"] else ": none yet"))
    for move in w["history"]:
        step = f" ({move['step']})" if move["step"] else ""
        click.echo(f"  {when(move['at'])}  {move['from_state']} -> {move['to_state']}{step}")


@workflows.command("cancel")
@click.argument("workflow_id")
@click.option("--reason", required=True, help="Why; kept in the audit and the end reason.")
@click.option("--by", "requested_by", help="Who asks [default: the login name].")
@click.pass_context
def cancel_workflow(
    ctx: click.Context, workflow_id: str, reason: str, requested_by: str | None
) -> None:
    """Cancel a running workflow: the tracker undoes what it did (the running step
    included) and it ends compensated, or failed when there was nothing to undo."""
    answer = gateway_of(ctx).post(
        f"/v1/workflows/{urllib.parse.quote(workflow_id, safe='')}/cancel",
        {"reason": reason, "requested_by": requested_by or getpass.getuser()},
    )
    again = " (asked before: nothing new published)" if answer.get("duplicate") else ""
    click.echo(
        f"cancellation of {workflow_id} published{again}: WorkflowCancelled "
        f"{answer['event_id']} on {answer['topic']}[{answer['partition']}]@{answer['offset']}"
    )


IN_FLIGHT = tuple(s.value for s in WorkflowState if s.value not in TERMINAL)
"""The states a workflow can be stuck in."""


@workflows.command("stuck")
@click.option(
    "--older-than",
    default="1h",
    show_default=True,
    metavar="DURATION",
    help="No transition for longer than this (ms, s, m, h, d, w).",
)
@click.option("--state", type=click.Choice(IN_FLIGHT), help="Only workflows in this state.")
@click.option("--flow", help="Only workflows of this flow.")
@click.option("--json", "as_json", is_flag=True, help="Print the stuck workflows as JSON.")
@click.pass_context
def stuck_workflows(
    ctx: click.Context, older_than: str, state: str | None, flow: str | None, as_json: bool
) -> None:
    """Workflows in flight with no transition for longer than --older-than, counted by
    state and flow version, oldest first. Exits 1 when there are any (for a cron job)."""
    try:
        limit_ms = positive_duration_ms(older_than)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from None
    client = gateway_of(ctx)
    now = dt.datetime.now(dt.UTC)
    found = []
    for wanted in [state] if state else IN_FLIGHT:
        after = None
        while True:
            page = client.get("/v1/workflows", state=wanted, flow=flow, limit=1000, after=after)
            for w in page["workflows"]:
                since = dt.datetime.fromisoformat(w["entered_state_at"].replace("Z", "+00:00"))
                idle_ms = int((now - since).total_seconds() * 1000)
                if idle_ms > limit_ms:
                    found.append({**w, "idle_ms": idle_ms})
            after = page.get("next_after")
            if not after:
                break
    found.sort(key=lambda w: -w["idle_ms"])
    if as_json:
        click.echo(json.dumps(found, indent=2))
    elif not found:
        click.echo(f"no workflow in flight has been idle for more than {older_than}")
    else:
        counts = Counter((w["state"], f"{w['flow']} v{w['flow_version']}") for w in found)
        click.echo(f"{len(found)} workflow(s) idle for more than {older_than}:")
        print_table(
            ["COUNT", "STATE", "FLOW"],
            [[str(n), in_state, version] for (in_state, version), n in sorted(counts.items())],
            right={0},
            indent=2,
        )
        click.echo("")
        rows = [
            [
                w["workflow_id"],
                f"{w['flow']} v{w['flow_version']}",
                w["state"],
                w["current"] or "-",
                format_duration(w["idle_ms"]),
            ]
            for w in found[:50]
        ]
        print_table(["WORKFLOW", "FLOW", "STATE", "CURRENT", "IDLE"], rows)
    if found:
        ctx.exit(1)


@click.group()
@gateway_options
@click.pass_context
def gates(ctx: click.Context, gateway_url: str | None, api_key: str | None) -> None:
    """Human gates: list the open ones, approve or reject with a gate token."""
    connect(ctx, gateway_url, api_key)


@gates.command("list")
@click.option("--assignee", help="Only gates held by this person.")
@click.option("--flow", help="Only gates of this flow.")
@click.option("--json", "as_json", is_flag=True, help="Print the gateway's JSON answer.")
@click.pass_context
def list_gates(ctx: click.Context, assignee: str | None, flow: str | None, as_json: bool) -> None:
    """List the gates waiting for a person, with their tokens."""
    answer = gateway_of(ctx).get("/v1/gates", assignee=assignee, flow=flow)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    rows = [
        [
            g["workflow_id"],
            g["gate"],
            g["assignee"],
            str(g["escalation_level"]),
            when(g["deadline"]),
            g["token"],
        ]
        for g in answer["gates"]
    ]
    if not rows:
        click.echo("no gate is waiting for a decision", err=True)
        return
    print_table(["WORKFLOW", "GATE", "ASSIGNEE", "LEVEL", "DEADLINE", "TOKEN"], rows, right={3})


def _decide(decision: str) -> click.Command:
    @click.command(decision)
    @click.argument("token")
    @click.option("--workflow", "workflow_id", required=True, help="The workflow the gate is in.")
    @click.option("--by", "decided_by", help="Who decides [default: the login name].")
    @click.option("--comment", help="Why; kept in the GateDecided event.")
    @click.pass_context
    def command(
        ctx: click.Context,
        token: str,
        workflow_id: str,
        decided_by: str | None,
        comment: str | None,
    ) -> None:
        answer = gateway_of(ctx).post(
            "/v1/gates/decisions",
            {
                "token": token,
                "workflow_id": workflow_id,
                "decision": decision,
                "decided_by": decided_by or getpass.getuser(),
                **({"comment": comment} if comment else {}),
            },
        )
        verb = "approved" if decision == "approve" else "rejected"
        repeat = " (already recorded: nothing new published)" if answer.get("duplicate") else ""
        click.echo(
            f"{verb} gate '{answer['gate']}' of {answer['workflow_id']}{repeat}: event "
            f"{answer['event_id']} on {answer['topic']}[{answer['partition']}]@{answer['offset']}"
        )

    command.help = (
        f"{decision.capitalize()} the gate that TOKEN opens (from `sagalog gates list` "
        "or the gate's notification)."
    )
    return command


gates.add_command(_decide("approve"))
gates.add_command(_decide("reject"))
