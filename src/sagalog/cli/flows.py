"""``sagalog flows``: check the workflow definitions in ``topology/flows/``, and draw them."""

from __future__ import annotations

from pathlib import Path

import click

from sagalog.agents.binding import bind
from sagalog.cli.agent_modules import add_import_paths, load_agent
from sagalog.cli.context import Project, pass_project
from sagalog.durations import format_duration
from sagalog.errors import AgentContractError, FlowDefinitionError
from sagalog.flows.graph import GraphFormat, render
from sagalog.flows.loader import FlowCheck, check_flows
from sagalog.flows.model import Flow

_SUFFIX_FORMATS: dict[str, GraphFormat] = {
    ".dot": "dot",
    ".gv": "dot",
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".md": "mermaid",
}


@click.group()
def flows() -> None:
    """Workflow definitions: steps, gates, compensations and timeouts as data."""


def _check(project: Project) -> FlowCheck:
    return check_flows(
        project.root / "topology" / "flows", catalog=project.catalog, topology=project.topology
    )


def _summary(flow: Flow) -> str:
    parts = [f"{len(flow.steps)} step(s)", f"{len(flow.gates)} gate(s)"]
    if flow.waits:
        parts.append(f"{len(flow.waits)} wait(s)")
    if flow.segments:
        parts.append(f"{len(flow.segments)} segment(s)")
    if flow.sla:
        parts.append(f"{len(flow.sla)} SLA rule(s)")
    parts.append(f"deadline {format_duration(flow.deadline)}")
    return f"{flow.label}: {', '.join(parts)} ({flow.source})"


@flows.command()
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="MODULE[:ATTR]",
    help="Also check this agent's handlers against the flows (repeatable).",
)
@click.option(
    "--path",
    "paths",
    multiple=True,
    type=click.Path(file_okay=False, exists=True),
    help="Add a folder to the import path for --agent (e.g. services).",
)
@pass_project
def check(project: Project, agents: tuple[str, ...], paths: tuple[str, ...]) -> None:
    """Load every flow version and report every problem.

    With --agent, each agent's declared handlers are checked against the flow steps
    that name it: the events that start and complete each step, and a compensation
    where the flow undoes the step (the check `sagalog run agent` makes at start).

    Exits 0 when all flows may run and every agent fits them, 2 when any file has a
    problem or an agent does not fit; the message names the file, flow, version,
    step (and agent) and the problem, one line each.
    """
    result = _check(project)
    for flow in result.flows:
        click.secho(f"ok  {_summary(flow)}", fg="green")
    if not result.ok:
        raise result.error()
    add_import_paths(paths)
    mismatches: list[str] = []
    for module in agents:
        agent, _ = load_agent(module)
        try:
            bound = bind(agent, result.flows)
        except AgentContractError as exc:
            mismatches.append(str(exc))
            continue
        steps = sorted({s.step for s in [*bound.handlers.values()]})
        click.secho(
            f"ok  agent {agent.name} ({module}): fits steps {', '.join(steps)} on "
            f"{', '.join(bound.topics)}",
            fg="green",
        )
    if mismatches:
        raise AgentContractError("\n".join(mismatches))


@flows.command()
@click.argument("flow")
@click.option("--version", "version", type=int, help="The flow version [default: the latest].")
@click.option(
    "--format",
    "graph_format",
    type=click.Choice(["mermaid", "dot"]),
    help="Mermaid or Graphviz [default: from the -o suffix (.dot, .gv), else mermaid].",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write to this file instead of stdout.",
)
@pass_project
def graph(
    project: Project,
    flow: str,
    version: int | None,
    graph_format: GraphFormat | None,
    output: Path | None,
) -> None:
    """Draw FLOW's state machine as Mermaid or Graphviz.

    Steps and gates in order, approve and reject edges, failures and timeouts leading
    into the compensation chain, which runs backwards; segments as boxes. Other flow
    files need not be valid; the one drawn must be.
    """
    result = _check(project)
    own = [p for p in result.problems if p.flow == flow and version in (None, p.version)]
    if own:
        raise FlowDefinitionError(
            "\n".join(str(p) for p in own) + f"\nfix {flow} before drawing it"
        )
    registry = result.registry
    chosen = registry.latest(flow) if version is None else registry.get(flow, version)
    if graph_format is None:
        suffix = output.suffix.lower() if output is not None else ""
        graph_format = _SUFFIX_FORMATS.get(suffix, "mermaid")
    text = render(chosen, format=graph_format)
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {chosen.label} as {graph_format} to {output}", err=True)
