"""``sagalog``: the entry point, global options and error handling.

Every ``SagalogError`` becomes one message on stderr and its family's exit code
(2 bad input, 3 a service unreachable, 4 a refused change), never a traceback:
the message already says what to do.
"""

from __future__ import annotations

from typing import Any

import click

from sagalog import __version__
from sagalog.cli.analytics import analytics
from sagalog.cli.audit import audit
from sagalog.cli.budgets import budgets
from sagalog.cli.clock import clock
from sagalog.cli.context import Project
from sagalog.cli.dlq import dlq
from sagalog.cli.erase import erase
from sagalog.cli.events import publish, tail_command
from sagalog.cli.flows import flows
from sagalog.cli.keys import keys
from sagalog.cli.migrate import migrate
from sagalog.cli.new import new
from sagalog.cli.replay import replay
from sagalog.cli.run import run
from sagalog.cli.schemas import schemas
from sagalog.cli.topology import topology
from sagalog.cli.workflows import gates, workflows
from sagalog.errors import SagalogError
from sagalog.settings import ClientSettings


class _Sagalog(click.Group):
    """The root group: turns a ``SagalogError`` into its message and exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SagalogError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            raise click.exceptions.Exit(exc.exit_code) from exc


@click.group(
    cls=_Sagalog, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="sagalog")
@click.option(
    "--project-dir",
    type=click.Path(file_okay=False, exists=True),
    help="Folder holding schemas/ and topology/ [env SAGALOG_PROJECT_DIR; default .]",
)
@click.option(
    "--bootstrap-servers",
    metavar="HOST:PORT",
    help="Kafka brokers [env SAGALOG_BOOTSTRAP_SERVERS; default 127.0.0.1:9092]",
)
@click.option(
    "--schema-registry-url",
    metavar="URL",
    help="Confluent-compatible registry API [env SAGALOG_SCHEMA_REGISTRY_URL]",
)
@click.pass_context
def cli(ctx: click.Context, /, **options: Any) -> None:
    """sagalog: long-running, event-sourced workflows on Apache Kafka.

    Start with `sagalog dev up` (local Kafka and schema registry), then
    `sagalog topology apply`, `sagalog publish` and `sagalog tail`.
    """
    overrides = {k: v for k, v in options.items() if v is not None}
    ctx.obj = Project(settings=ClientSettings(**overrides))


def _register_dev() -> None:
    try:
        from sagalog.cli.dev import dev
    except ImportError:  # the local stack module is optional in slim installs
        return
    cli.add_command(dev)


_register_dev()
cli.add_command(schemas)
cli.add_command(topology)
flows.add_command(migrate)
cli.add_command(flows)
cli.add_command(publish)
cli.add_command(tail_command)
cli.add_command(run)
cli.add_command(workflows)
cli.add_command(gates)
cli.add_command(dlq)
cli.add_command(clock)
cli.add_command(analytics)
cli.add_command(audit)
cli.add_command(erase)
cli.add_command(keys)
cli.add_command(budgets)
cli.add_command(replay)
cli.add_command(new)


def main() -> None:
    """Console-script entry point."""
    cli.main(prog_name="sagalog")
