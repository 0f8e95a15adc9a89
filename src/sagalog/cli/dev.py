"""``sagalog dev``: a local Kafka and schema registry for newcomers and CI.

Progress goes to stderr and the ``export`` lines of ``up`` to stdout, so
``eval "$(sagalog dev up)"`` configures the current shell in one step.
"""

from __future__ import annotations

import json
from typing import Any

import click
from pydantic import ValidationError

from sagalog.devstack import DevStackSettings, LocalStack
from sagalog.devstack.layout import COMPONENTS
from sagalog.devstack.logs import follow, tail_lines
from sagalog.devstack.reports import ComponentStatus
from sagalog.errors import ConfigurationError, SagalogError


class _DevGroup(click.Group):
    """Turns a ``SagalogError`` into its message and exit code.

    The root ``sagalog`` group does the same; doing it here too keeps the group
    usable on its own (``python -c "from sagalog.cli.dev import dev; dev()"``).
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SagalogError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            raise click.exceptions.Exit(exc.exit_code) from exc


def _progress(message: str) -> None:
    click.echo(message, err=True)


def _variable(field: str) -> str:
    """The environment variable behind a settings field (``JAVA_HOME`` is read as is)."""
    return field if field.isupper() else f"SAGALOG_DEV_{field.upper()}"


def _settings() -> DevStackSettings:
    """Read ``SAGALOG_DEV_*``; a bad value is a configuration error, not a traceback."""
    try:
        return DevStackSettings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{_variable(str(error['loc'][0]))}: {error['msg']}"
            if error["loc"]
            else str(error["msg"]).removeprefix("Value error, ")
            for error in exc.errors()
        )
        raise ConfigurationError(f"invalid dev stack settings: {problems}") from exc


@click.group(cls=_DevGroup)
def dev() -> None:
    """Run a single-node Kafka and an Apicurio schema registry on this machine.

    No Docker needed: the jars come from Maven Central (once, into the cache) and
    run on a local JDK. Ports and directories are set with SAGALOG_DEV_* variables
    (SAGALOG_DEV_KAFKA_PORT, SAGALOG_DEV_REGISTRY_PORT, SAGALOG_DEV_STATE_DIR, ...).
    """


@dev.command()
def up() -> None:
    """Start Kafka and the schema registry (if not running) and wait until they answer.

    Safe to repeat: running services are left alone. Prints the two variables
    that point sagalog at the stack.
    """
    report = LocalStack(_settings(), progress=_progress).up()
    _progress(f"dev stack ready in {report.elapsed_s:.1f}s; point sagalog at it with:")
    click.echo(f"export SAGALOG_BOOTSTRAP_SERVERS={report.bootstrap_servers}")
    click.echo(f"export SAGALOG_SCHEMA_REGISTRY_URL={report.schema_registry_url}")


@dev.command()
def down() -> None:
    """Stop the registry, then Kafka (SIGTERM, SIGKILL after SAGALOG_DEV_STOP_TIMEOUT_S).

    Data is kept: topics, offsets and registered schemas are back after `up`.
    """
    LocalStack(_settings(), progress=_progress).down()


def _status_line(component: ComponentStatus) -> str:
    pid = f"pid {component.pid}" if component.pid is not None else "-"
    java = f"  java {component.java}" if component.java else ""
    return (
        f"{component.name:<9} {component.state.value:<19} {pid:<11} "
        f"{component.host}:{component.port:<6} {component.version or '-'}{java}"
    )


@dev.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(as_json: bool) -> None:
    """Show whether each component runs and answers; exit 0 only if both do."""
    stack_status = LocalStack(_settings()).status()
    if as_json:
        click.echo(json.dumps(stack_status.to_dict(), indent=2))
    else:
        for component in stack_status.components:
            click.echo(_status_line(component))
    if not stack_status.healthy:
        raise click.exceptions.Exit(1)


@dev.command()
@click.argument("component", required=False, type=click.Choice(COMPONENTS))
@click.option("-f", "--follow", "keep_following", is_flag=True, help="Keep printing new lines.")
@click.option(
    "-n",
    "--lines",
    "count",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="How many of the last lines to print first.",
)
def logs(component: str | None, keep_following: bool, count: int) -> None:
    """Print the log of kafka, the registry, or both (the default)."""
    layout = LocalStack(_settings()).layout
    names = (component,) if component else COMPONENTS
    paths = {name: layout.log_file(component=name) for name in names}
    prefix = len(names) > 1
    for name, path in paths.items():
        if prefix:
            click.echo(f"==> {path} <==")
        if not path.is_file():
            click.echo(f"(no log yet: {name} has not been started with this state directory)")
        for line in tail_lines(path, count=count):
            click.echo(line)
    if not keep_following:
        return
    try:
        for name, line in follow(paths):
            click.echo(f"{name} | {line}" if prefix else line)
    except KeyboardInterrupt:
        return
