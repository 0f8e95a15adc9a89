"""``sagalog run agent <module>``: run one instance of an agent service."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from sagalog.agents import Agent, AgentSettings
from sagalog.agents import run as run_until_stopped
from sagalog.errors import ConfigurationError


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
    own env prefix applies. Scale out by starting more processes, each with its own
    instance id. Exits 0 after SIGTERM, 70 when fenced by a newer instance.
    """
    for path in paths:
        sys.path.insert(0, str(Path(path).resolve()))
    name, _, attribute = module.partition(":")
    try:
        loaded = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigurationError(
            f"cannot import agent module '{name}': {exc}; pass --path with the folder that holds it"
        ) from exc
    agent = getattr(loaded, attribute or "agent", None)
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"'{module}' has no Agent named '{attribute or 'agent'}'")
    settings = getattr(loaded, "settings", None)
    run_until_stopped(agent, settings if isinstance(settings, AgentSettings) else None)
