"""``sagalog run agent <module>``: run one instance of an agent service."""

from __future__ import annotations

from pathlib import Path

import click

from sagalog.agents.settings import AgentSettings
from sagalog.cli.agent_modules import add_import_paths, load_agent
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.agent_contract import check_agent_contract
from sagalog.flows.loader import load_flows
from sagalog.topology.loader import load_topology


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
    project's flows (as `sagalog flows check --agent MODULE` does): a mismatch exits 2
    naming the agent, the flow and the step. Scale out by starting more processes,
    each with its own instance id. Exits 0 after SIGTERM, 70 when fenced by a newer
    instance.
    """
    add_import_paths(paths)
    agent, loaded = load_agent(module)
    found = getattr(loaded, "settings", None)
    settings = found if isinstance(found, AgentSettings) else AgentSettings()
    root = Path(settings.project_dir)
    if (root / "topology" / "flows").is_dir():
        catalog = SchemaCatalog.load(root / "schemas")
        topology = load_topology(root / "topology", known_schemas=catalog)
        flows = load_flows(root / "topology" / "flows", catalog=catalog, topology=topology)
        check_agent_contract(agent, flows)
    agent.run(settings)
