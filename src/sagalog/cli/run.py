"""``sagalog run tracker|gateway|agent|agents``: run one instance of a sagalog service.

Each runs in the foreground until SIGTERM and exits with a code of
``sagalog.exit_codes``; the root's ``--project-dir``, ``--bootstrap-servers`` and
``--schema-registry-url`` apply to it as to every command, over its environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sagalog.agents import Agent, AgentSettings
from sagalog.agents import run_agent as run_until_stopped
from sagalog.agents.running import run_together
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
    through `sagalog.run_agent` does): a mismatch exits 2
    naming the agent, the flow and the step. Scale out by starting more processes,
    each with its own instance id. Exits 0 after SIGTERM, 70 when fenced by a newer
    instance.
    """
    add_import_paths(paths)
    agent, settings = _agent_and_settings(module)
    run_until_stopped(agent, settings)


@run.command("agents")
@click.argument("modules", nargs=-1, required=True)
@click.option(
    "--path",
    "paths",
    multiple=True,
    type=click.Path(file_okay=False, exists=True),
    help="Add a folder to the import path (e.g. services).",
)
def run_agents(modules: tuple[str, ...], paths: tuple[str, ...]) -> None:
    """Run the agents declared in MODULES side by side in one process.

    They share one consumer (each topic is fetched once for all of them), one
    producer and one transaction per batch; each keeps its own handlers, settings
    (its module's `settings`, as `run agent` reads them: retries, breakers, rate
    limits, dead letters), projection and retry topic, and decides exactly as it
    would alone. The process's own settings (instance id, data folder, batching)
    are SAGALOG_AGENT_*. Its consumer group is sagalog-agent-<names sorted, joined
    by +>: a set of agents run together keeps its offsets apart from the same agents
    run alone. Exits as `run agent` does.
    """
    add_import_paths(paths)
    members = [_agent_and_settings(module) for module in modules]
    overrides = _root_overrides()
    run_together(members, AgentSettings(**overrides))


def _agent_and_settings(module: str) -> tuple[Agent, AgentSettings]:
    """The agent MODULE declares, and its settings: the module's ``settings`` (so the
    service's own env prefix applies) or ``AgentSettings``, under the root's options."""
    agent, loaded = load_agent(module)
    found = getattr(loaded, "settings", None)
    overrides = _root_overrides()
    if isinstance(found, AgentSettings):
        return agent, (type(found)(**overrides) if overrides else found)
    return agent, AgentSettings(**overrides)


def _root_overrides() -> dict[str, Any]:
    """The connection and project options given to ``sagalog`` itself, as settings fields."""
    params = click.get_current_context().find_root().params
    return {name: value for name, value in params.items() if value is not None}


@run.command("tracker")
@click.option(
    "--flows",
    "flows_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Flow files [env SAGALOG_TRACKER_FLOWS_DIR; default <project-dir>/topology/flows].",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="This worker's RocksDB tables [env SAGALOG_TRACKER_DATA_DIR].",
)
def run_tracker(flows_dir: Path | None, data_dir: Path | None) -> None:
    """Run one saga-tracker worker over the project's flows (scale out: start more).

    The project folder holds schemas/ and topology/; its flows are loaded and checked
    first (exit 2 naming the file, flow and step when one is refused). Settings are
    SAGALOG_TRACKER_* over SAGALOG_*. Exits 0 after SIGTERM once its batch is
    committed, 70 when it gave a stalled partition back (restart it at once).
    """
    from sagalog.services.tracker.__main__ import main
    from sagalog.services.tracker.settings import TrackerSettings

    overrides = _root_overrides()
    if flows_dir is not None:
        overrides["flows_dir"] = flows_dir
    if data_dir is not None:
        overrides["data_dir"] = data_dir
    raise SystemExit(main(TrackerSettings(**overrides)))


@run.command("gateway")
@click.option("--host", help="Address to listen on [env GATEWAY_HOST].")
@click.option("--port", type=click.IntRange(1, 65535), help="Port [env GATEWAY_PORT].")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The read model's RocksDB [env GATEWAY_DATA_DIR].",
)
def run_gateway(host: str | None, port: int | None, data_dir: Path | None) -> None:
    """Serve the HTTP gateway: human decisions on gates, webhooks, workflow reads.

    Settings are GATEWAY_* over SAGALOG_*; GATEWAY_API_KEYS and GATEWAY_GATE_SECRET are
    required (exit 2 naming the one missing).
    """
    from sagalog.services.gateway.__main__ import main
    from sagalog.services.gateway.settings import GatewaySettings

    overrides = _root_overrides()
    for name, value in (("host", host), ("port", port), ("data_dir", data_dir)):
        if value is not None:
            overrides[name] = value
    raise SystemExit(main(GatewaySettings(**overrides)))
