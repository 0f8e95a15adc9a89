"""``sagalog topology``: make the cluster match ``topology/``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from sagalog.cli.context import Project, pass_project
from sagalog.errors import ConfigurationError
from sagalog.exit_codes import ExitCode
from sagalog.flows.loader import load_flows
from sagalog.topology.acls import derive_acls
from sagalog.topology.apply import TopologyClient
from sagalog.topology.plan import Plan

if TYPE_CHECKING:
    from sagalog.devstack.credentials import CredentialStore


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
        raise SystemExit(ExitCode.PLAN_DIFFERS)


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
    is_flag=True,
    help="Dev mode: also create each declared principal's SCRAM-SHA-512 user on the secure "
    "dev stack of SAGALOG_DEV_STATE_DIR, with the password `sagalog dev env --principal "
    "NAME` prints (made on first use, never printed here).",
)
@pass_project
def apply(project: Project, force: bool, dev_users: bool) -> None:
    """Create and update topics, register schemas and grant ACLs, idempotently.

    Changes that delete a topic, change a topic's partition count or remove an ACL
    the topology does not derive are refused (listed, exit 4) unless --force is given;
    the safe changes are made either way.
    """
    passwords = _dev_stack_passwords(project) if dev_users else None
    client = TopologyClient(project.settings, project.catalog)
    result = client.plan(project.topology)
    created = []
    if passwords is not None:
        from sagalog.topology.dev_users import ensure_dev_users

        created = ensure_dev_users(
            client.admin,
            sorted(project.topology.principals),
            passwords,
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
        click.echo(f"{len(created)} SCRAM user(s) created on the dev stack")


def _dev_stack_passwords(project: Project) -> CredentialStore:
    """The password store of the secure dev stack that ``--dev-users`` creates users on.

    Refused unless the stack of ``SAGALOG_DEV_STATE_DIR`` is secure and the cluster
    ``apply`` talks to is that stack: the dev stack's passwords must not become logins
    of another cluster (a shared or a production one) by a stale variable.

    Raises:
        ConfigurationError: a plaintext stack, or a cluster that is not the stack.
    """
    from sagalog.cli.dev import dev_stack_settings
    from sagalog.devstack import LocalStack

    stack = LocalStack(dev_stack_settings())
    where = f"the dev stack in {stack.settings.state_dir}"
    if not stack.shape.secure:
        raise ConfigurationError(
            f"--dev-users needs a secure dev stack, and {where} is plaintext (it has no "
            f"SCRAM users); start one with `sagalog dev up --secure` in another "
            f"SAGALOG_DEV_STATE_DIR, or drop --dev-users"
        )
    if not stack.serves(project.settings.bootstrap_servers):
        raise ConfigurationError(
            f"--dev-users creates the users of {where} ({stack.bootstrap_servers}), but "
            f"SAGALOG_BOOTSTRAP_SERVERS is {project.settings.bootstrap_servers}; run "
            f'`eval "$(sagalog dev env)"` first, or drop --dev-users on another cluster'
        )
    return stack.security.credentials


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
