"""``sagalog dev``: a local Kafka and schema registry for newcomers and CI.

Progress goes to stderr and the ``export`` lines of ``up`` and ``env`` to stdout,
so ``eval "$(sagalog dev up)"`` configures the current shell in one step.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import click
from pydantic import ValidationError

from sagalog.cli.tables import print_fields, print_table
from sagalog.devstack import DevStackSettings, LocalStack
from sagalog.devstack.layout import REGISTRY
from sagalog.devstack.logs import follow, tail_lines
from sagalog.devstack.profile import export_lines
from sagalog.devstack.reports import ComponentStatus
from sagalog.devstack.settings import inherited_environment
from sagalog.devstack.shape import BROKER_COUNTS
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


def dev_stack_settings() -> DevStackSettings:
    """Read ``SAGALOG_DEV_*``; a bad value is a configuration error, not a traceback.

    Public because ``topology apply --dev-users`` finds the stack the same way.
    """
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


def _stack(*, brokers: int | None = None, secure: bool | None = None) -> LocalStack:
    """The stack of ``SAGALOG_DEV_STATE_DIR`` in its recorded shape (or the one asked)."""
    return LocalStack(dev_stack_settings(), brokers=brokers, secure=secure, progress=_progress)


@click.group(cls=_DevGroup)
def dev() -> None:
    """Run Kafka (one node or a quorum of three) and an Apicurio registry on this machine.

    No Docker needed: the jars come from Maven Central (once, into the cache) and
    run on a local JDK. Ports and directories are set with SAGALOG_DEV_* variables
    (SAGALOG_DEV_KAFKA_PORT, SAGALOG_DEV_REGISTRY_PORT, SAGALOG_DEV_STATE_DIR, ...).
    """


@dev.command()
@click.option(
    "--brokers",
    type=click.Choice([str(count) for count in BROKER_COUNTS]),
    default=None,
    help="Kafka nodes (combined broker+controller): 1, or a quorum of 3 with RF 3 / min "
    "ISR 2. Default: what the state directory was created with, else 1.",
)
@click.option(
    "--secure",
    is_flag=True,
    default=None,
    help="TLS everywhere, SASL/SCRAM and mTLS for clients, ACLs enforced (deny by "
    "default), registry behind basic auth. Default: as created, else plaintext.",
)
def up(brokers: str | None, secure: bool | None) -> None:
    """Start Kafka and the schema registry (if not running) and wait until they answer.

    Safe to repeat: running services are left alone, and the shape (--brokers,
    --secure) is remembered in the state directory. Prints every SAGALOG_* variable
    a client needs, for `eval "$(sagalog dev up)"`.
    """
    stack = _stack(brokers=None if brokers is None else int(brokers), secure=secure)
    report = stack.up()
    _progress(
        f"dev stack ({stack.shape.describe()}) ready in {report.elapsed_s:.1f}s; "
        f"point sagalog at it with:"
    )
    for line in export_lines(stack.client_environment()):
        click.echo(line)


@dev.command()
@click.option(
    "--principal",
    metavar="NAME",
    default=None,
    help="A service's own login (secure stack): its SCRAM user, generated on first use.",
)
@click.option(
    "--mtls",
    is_flag=True,
    help="With --principal: connect with the principal's client certificate instead.",
)
def env(principal: str | None, mtls: bool) -> None:
    """Print the SAGALOG_* exports for this stack without starting anything.

    The one place the secure stack's passwords are shown: `eval "$(sagalog dev env)"`.
    """
    if mtls and principal is None:
        raise ConfigurationError("--mtls needs --principal NAME: whose certificate to use")
    for line in export_lines(_stack().client_environment(principal=principal, mtls=mtls)):
        click.echo(line)


@dev.command()
@click.argument("name")
def cert(name: str) -> None:
    """Issue (once) a client certificate of the secure stack's CA for principal NAME.

    CN=NAME maps to User:NAME on the brokers, the same principal as the SCRAM user
    NAME. Prints the files; `sagalog dev env --principal NAME --mtls` prints the exports.
    """
    files = _stack().issue_client_certificate(name)
    print_fields(
        [("certificate:", str(files.certificate)), ("key:", str(files.key)), ("ca:", str(files.ca))]
    )


@dev.command()
def down() -> None:
    """Stop the registry, then Kafka (SIGTERM, SIGKILL after SAGALOG_DEV_STOP_TIMEOUT_S).

    Data is kept: topics, offsets and registered schemas are back after `up`.
    """
    _stack().down()


def _status_row(component: ComponentStatus) -> list[str]:
    return [
        component.name,
        component.state.value,
        str(component.pid) if component.pid is not None else "-",
        f"{component.host}:{component.port}",
        component.version or "-",
        component.java or "-",
    ]


@dev.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(as_json: bool) -> None:
    """Show whether each component runs and answers; exit 0 only if all do."""
    stack = LocalStack(dev_stack_settings())
    stack_status = stack.status()
    if as_json:
        click.echo(json.dumps(stack_status.to_dict(), indent=2))
    else:
        click.echo(f"# {stack.shape.describe()}, state in {stack.settings.state_dir}")
        print_table(
            ["COMPONENT", "STATE", "PID", "ADDRESS", "VERSION", "JAVA"],
            [_status_row(component) for component in stack_status.components],
        )
    if not stack_status.healthy:
        raise click.exceptions.Exit(1)


@dev.command()
@click.argument("component", required=False)
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
    """Print the log of one component (kafka or kafka-1..3, registry), or of all."""
    stack = LocalStack(dev_stack_settings())
    components = (*(node.component for node in stack.nodes), REGISTRY)
    if component is not None and component not in components:
        raise ConfigurationError(
            f"this stack ({stack.shape.describe()}) has no component {component!r}: "
            f"use one of {', '.join(components)}"
        )
    names = (component,) if component else components
    paths = {name: stack.layout.log_file(component=name) for name in names}
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


@dev.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("tool")
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def kafka(tool: str, arguments: tuple[str, ...]) -> None:
    """Run one of Kafka's CLIs (kafka-acls, kafka-topics, ...) against this stack.

    --bootstrap-server, and on the secure stack an admin --command-config, are added
    unless given. Example: `sagalog dev kafka kafka-acls --list`. TOOL may also be
    a main class of the classpath (org.apache.kafka.tools.TopicCommand). Exits with
    the tool's exit code.
    """
    command = LocalStack(dev_stack_settings()).kafka_tool_command(tool, list(arguments))
    completed = subprocess.run(command, check=False)
    raise click.exceptions.Exit(completed.returncode)


@dev.command(
    name="run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--principal", metavar="NAME", default=None, help="As for `env`: a service's login.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_command(principal: str | None, command: tuple[str, ...]) -> None:
    """Run COMMAND with this stack's SAGALOG_* variables (those not already set).

    What `make demo`, `make test` and `make bench` run through: the stack says how
    to reach it (brokers, registry, its replication profile, its logins) and a
    variable the caller exported still wins, so the same targets run against another
    cluster by exporting its settings. Exits with COMMAND's exit code.
    """
    environment = inherited_environment()
    for name, value in _stack().client_environment(principal=principal).items():
        environment.setdefault(name, value)
    try:
        completed = subprocess.run(list(command), env=environment, check=False)
    except FileNotFoundError as exc:
        raise ConfigurationError(f"cannot run {command[0]!r}: {exc.strerror}") from exc
    raise click.exceptions.Exit(completed.returncode)
