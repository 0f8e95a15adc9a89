"""``sagalog topology``: make the cluster match ``topology/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml

from sagalog.cli.context import Project, pass_project
from sagalog.errors import ConfigurationError
from sagalog.exit_codes import ExitCode
from sagalog.flows.loader import load_flows
from sagalog.topology.acls import derive_acls
from sagalog.topology.apply import TopologyClient
from sagalog.topology.asyncapi import asyncapi_document
from sagalog.topology.plan import Plan
from sagalog.topology.strimzi import strimzi_resources

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


@topology.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write it to this file (.json for JSON) [default: standard output, YAML].",
)
@click.option("--title", default="sagalog workflows", show_default=True, help="info.title")
@click.option("--version", "doc_version", default="1.0.0", show_default=True, help="info.version")
@pass_project
def asyncapi(project: Project, output: Path | None, title: str, doc_version: str) -> None:
    """Generate the project's AsyncAPI 3.0 document (no cluster needed).

    Channels are the topics of topology/, messages their Avro schemas with the
    CloudEvents headers, and operations which service sends and which receives each
    message, as the flows and the declared services say.
    """
    topology = project.topology
    flows = load_flows(
        project.root / "topology" / "flows", catalog=project.catalog, topology=topology
    )
    document = asyncapi_document(
        topology,
        flows,
        project.catalog,
        title=title,
        version=doc_version,
        bootstrap_servers=project.settings.bootstrap_servers,
    )
    as_json = output is not None and output.suffix == ".json"
    text = (
        json.dumps(document, indent=2)
        if as_json
        else yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    )
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(
            f"wrote {output}: {len(document['channels'])} channel(s), "
            f"{len(document['components']['messages'])} message(s), "
            f"{len(document['operations'])} operation(s)"
        )


@topology.command()
@click.option("--strimzi", is_flag=True, required=True, help="As Strimzi KafkaTopic/KafkaUser.")
@click.option("--cluster", default="my-cluster", show_default=True, help="The Kafka resource.")
@click.option("--namespace", help="metadata.namespace of every resource [default: none].")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write them to this file [default: standard output].",
)
@pass_project
def export(
    project: Project, strimzi: bool, cluster: str, namespace: str | None, output: Path | None
) -> None:
    """Render the topology as Strimzi resources, for `kubectl apply` (no cluster needed).

    A KafkaTopic per declared topic (partitions, the cluster profile's replication and
    min.insync.replicas, retention) and a KafkaUser per declared service with SCRAM
    and the ACLs `topology acls` lists.
    """
    topology = project.topology
    flows = load_flows(
        project.root / "topology" / "flows", catalog=project.catalog, topology=topology
    )
    resources = strimzi_resources(
        topology,
        flows,
        cluster=cluster,
        replication_factor=project.settings.replication_factor,
        min_insync_replicas=project.settings.min_insync_replicas,
        namespace=namespace,
    )
    text = yaml.safe_dump_all(resources, sort_keys=False)
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text)
    kinds = [r["kind"] for r in resources]
    click.echo(
        f"wrote {output}: {kinds.count('KafkaTopic')} KafkaTopic(s), "
        f"{kinds.count('KafkaUser')} KafkaUser(s)"
    )
