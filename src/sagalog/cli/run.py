"""``sagalog run agent <module>``: run one instance of an agent service."""

from __future__ import annotations

import click

from sagalog.agents import AgentSettings
from sagalog.agents import run as run_until_stopped
from sagalog.cli.agent_modules import add_import_paths, load_agent


@click.group()
def run() -> None:
    """Run sagalog services."""


@run.command("agent")
@click.argument("module")
@click.option(
    "--path",
    "paths",
    multiple=True,
    type=click.Path(file_okay=False, exists=True),
    help="Add a folder to the import path (e.g. services).",
)
def run_agent(module: str, paths: tuple[str, ...]) -> None:
    """Run the agent declared in MODULE (module:attribute, attribute defaults to `agent`).

    The module's `settings` (an AgentSettings) is used when it has one, so the service's
    own env prefix applies. Before it starts, its handlers are checked against the
    project's flows (as `sagalog flows check --agent MODULE` does, and as every start
    through `sagalog.agents.run` does): a mismatch exits 2
    naming the agent, the flow and the step. Scale out by starting more processes,
    each with its own instance id. Exits 0 after SIGTERM, 70 when fenced by a newer
    instance.
    """
    add_import_paths(paths)
    agent, loaded = load_agent(module)
    found = getattr(loaded, "settings", None)
    run_until_stopped(agent, found if isinstance(found, AgentSettings) else None)
