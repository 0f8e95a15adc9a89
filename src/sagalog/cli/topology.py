"""``sagalog topology``: make the cluster match ``topology/``."""

from __future__ import annotations

from pathlib import Path

import click

from sagalog.cli.context import Project, pass_project
from sagalog.flows.loader import load_flows
from sagalog.topology.acls import derive_acls
from sagalog.topology.apply import TopologyClient
from sagalog.topology.dev_users import ensure_dev_users
from sagalog.topology.plan import Plan


@click.group()
def topology() -> None:
    """Topics, schema subjects and ACLs as code."""


def _show(plan: Plan) -> None:
    for note in plan.notes:
        click.secho(note, fg="yellow")
    if plan.empty:
        click.secho("nothing to change: the cluster matches the topology", fg="green")
        return
    for change in plan.changes:
        color = "red" if change.needs_force else None
        click.secho(change.describe(), fg=color)
    refused = len(plan.refused_without_force)
    click.echo(f"{len(plan.changes)} change(s)" + (f", {refused} need --force" if refused else ""))


@topology.command()
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 0 when nothing would change, 10 when something would (for CI).",
)
@pass_project
def plan(project: Project, detailed_exitcode: bool) -> None:
    """Show how the cluster and registry differ from the topology files.

    Topics, schema subjects and the ACLs of the services declared under services:,
    derived from the flows (no ACLs on a cluster without an authorizer).
    """
    client = TopologyClient(project.settings, project.catalog)
    result = client.plan(project.topology)
    _show(result)
    if detailed_exitcode and not result.empty:
        raise SystemExit(10)


@topology.command()
@click.option(
    "--force",
    is_flag=True,
    help="Also make changes that lose data or reorder keyed history, and remove ACLs of "
    "declared principals that the topology does not derive.",
)
@click.option(
    "--dev-users",
    "dev_users",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="SAGALOG_DEV_USERS_DIR",
    default=None,
    help="Dev mode: also create each declared principal's SCRAM-SHA-512 user, with a "
    "random password kept in DIR/scram/<user>.json (0600, never printed).",
)
@pass_project
def apply(project: Project, force: bool, dev_users: Path | None) -> None:
    """Create and update topics, register schemas and grant ACLs, idempotently.

    Changes that delete a topic, change a topic's partition count or remove an ACL
    the topology does not derive are refused (listed, exit 4) unless --force is given;
    the safe changes are made either way.
    """
    client = TopologyClient(project.settings, project.catalog)
    result = client.plan(project.topology)
    created = []
    if dev_users is not None:
        created = ensure_dev_users(
            client.admin,
            sorted(project.topology.principals),
            dev_users,
            timeout=client.timeout,
            report=click.echo,
        )
    if result.empty:
        _show(result)
        return
    for note in result.notes:
        click.secho(note, fg="yellow")
    client.apply(result, force=force, report=click.echo)
    click.secho(f"applied {len(result.changes)} change(s)", fg="green")
    if created:
        click.echo(f"{len(created)} SCRAM user(s) created in {dev_users}")


@topology.command()
@pass_project
def acls(project: Project) -> None:
    """List the ACL bindings derived for each declared service (no cluster needed)."""
    topology = project.topology
    if not topology.services:
        click.echo("no services declared under services: in topology/: ACLs are not managed")
        return
    flows = load_flows(
        project.root / "topology" / "flows", catalog=project.catalog, topology=topology
    )
    rules = derive_acls(topology, flows)
    for principal in sorted({r.principal for r in rules}):
        click.secho(principal, bold=True)
        for rule in (r for r in rules if r.principal == principal):
            click.echo(f"  {rule.describe()}  # {rule.why}")
    click.echo(f"{len(rules)} binding(s) for {len(topology.services)} service(s)")
