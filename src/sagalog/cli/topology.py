"""``sagalog topology``: make the cluster match ``topology/``."""

from __future__ import annotations

import click

from sagalog.cli.context import Project, pass_project
from sagalog.topology.apply import TopologyClient
from sagalog.topology.plan import Plan


@click.group()
def topology() -> None:
    """Topics and schema subjects as code."""


def _show(plan: Plan) -> None:
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
    """Show how the cluster and registry differ from the topology files."""
    client = TopologyClient(project.settings, project.catalog)
    result = client.plan(project.topology)
    _show(result)
    if detailed_exitcode and not result.empty:
        raise SystemExit(10)


@topology.command()
@click.option(
    "--force", is_flag=True, help="Also make changes that lose data or reorder keyed history."
)
@pass_project
def apply(project: Project, force: bool) -> None:
    """Create and update topics and register schemas, idempotently.

    Changes that delete a topic or change a topic's partition count are refused
    (listed, exit 4) unless --force is given; the safe changes are made either way.
    """
    client = TopologyClient(project.settings, project.catalog)
    result = client.plan(project.topology)
    if result.empty:
        _show(result)
        return
    client.apply(result, force=force, report=click.echo)
    click.secho(f"applied {len(result.changes)} change(s)", fg="green")
