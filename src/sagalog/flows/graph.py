"""A flow's state machine as a picture: Mermaid for READMEs, Graphviz for everything else.

Both renderers draw one ``StateGraph`` built from the flow, so they cannot disagree:
steps and gates forward in flow order, each gate's approve and reject edges, each
step's failure (its fail events or its timeout) leading into the compensation chain,
and the chain itself running backwards, one undo at a time, to ``compensated``.
Segments are drawn as boxes around their steps. The workflow deadline and the SLA
rules, which apply everywhere, are in the title and in comments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sagalog.flows.model import Flow, Gate, Step, format_duration

GraphFormat = Literal["mermaid", "dot"]
NodeKind = Literal["start", "step", "gate", "undo", "end"]
EdgeKind = Literal["forward", "approve", "reject", "fail", "undo"]

START, COMPLETED, COMPENSATED, FAILED = "start", "completed", "compensated", "failed"


@dataclass(frozen=True)
class Node:
    id: str
    lines: tuple[str, ...]
    kind: NodeKind


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str
    kind: EdgeKind


@dataclass(frozen=True)
class Cluster:
    id: str
    label: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class StateGraph:
    """The nodes, edges and segment boxes of one flow version, ready to render."""

    title: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    clusters: tuple[Cluster, ...]
    comments: tuple[str, ...]

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)


def _short(event_type: str) -> str:
    return event_type.rsplit(".", 1)[-1]


def _events(event_types: tuple[str, ...]) -> str:
    return " or ".join(_short(e) for e in event_types)


def _entry_id(entry: Step | Gate) -> str:
    return f"{entry.kind}_{entry.name}"


def state_graph(flow: Flow) -> StateGraph:
    """The state machine of ``flow`` as plain data."""
    nodes = [Node(START, ("start", _short(flow.starts_on)), "start")]
    edges: list[Edge] = []
    entries = flow.entries
    undoable = [i for i, e in enumerate(entries) if isinstance(e, Step) and e.undo_action]

    def undo_target(i: int) -> str:
        """Where a failure at entry ``i`` goes: undo the latest step before it."""
        earlier = [j for j in undoable if j < i]
        return f"undo_{entries[earlier[-1]].name}" if earlier else FAILED

    for i, entry in enumerate(entries):
        if isinstance(entry, Step):
            nodes.append(
                Node(
                    _entry_id(entry),
                    (entry.name, entry.agent, f"timeout {format_duration(entry.timeout)}"),
                    "step",
                )
            )
        else:
            lines = [f"gate {entry.name}", entry.assignee]
            lines += [
                f"after {format_duration(e.after)}: {e.to}" for e in entry.escalation
            ]
            lines.append(f"deadline {format_duration(entry.deadline)}: {entry.default}")
            nodes.append(Node(_entry_id(entry), tuple(lines), "gate"))
        source = START if i == 0 else _entry_id(entries[i - 1])
        if i == 0:
            label = _short(flow.starts_on)
        elif isinstance(entries[i - 1], Gate):
            label = _gate_label(entries[i - 1], "approve")  # type: ignore[arg-type]
        else:
            label = _events(entries[i - 1].completes_on)
        edges.append(
            Edge(source, _entry_id(entry), label, "approve" if "approved" in label else "forward")
        )
        if isinstance(entry, Step):
            failure = f"{_events(entry.fails_on)} or timeout {format_duration(entry.timeout)}"
            edges.append(Edge(_entry_id(entry), undo_target(i), failure, "fail"))
        else:
            edges.append(
                Edge(_entry_id(entry), undo_target(i), _gate_label(entry, "reject"), "reject")
            )
    last = entries[-1]
    closing = (
        _gate_label(last, "approve") if isinstance(last, Gate) else _events(last.completes_on)
    )
    edges.append(Edge(_entry_id(last), COMPLETED, closing, "forward"))

    reached = {e.target for e in edges}
    chain = [entries[j] for j in undoable if f"undo_{entries[j].name}" in reached]
    for k, step in enumerate(reversed(chain)):
        assert isinstance(step, Step)
        undo = step.compensation or step.irreversible
        assert undo is not None
        role = "undo" if step.compensation is not None else "follow-up of"
        nodes.append(
            Node(
                f"undo_{step.name}",
                (step.undo_action or "", f"{role} {step.name}", f"timeout {format_duration(undo.timeout)}"),
                "undo",
            )
        )
        earlier = list(reversed(chain))[k + 1 : k + 2]
        target = f"undo_{earlier[0].name}" if earlier else COMPENSATED
        edges.append(Edge(f"undo_{step.name}", target, _events(undo.completes_on), "undo"))
    nodes.append(Node(COMPLETED, ("completed",), "end"))
    targets = {e.target for e in edges}
    if COMPENSATED in targets:
        nodes.append(Node(COMPENSATED, ("compensated",), "end"))
    if FAILED in targets:
        nodes.append(Node(FAILED, ("failed",), "end"))

    clusters = tuple(
        Cluster(
            f"segment_{s.name}",
            f"{s.name}: timeout {format_duration(s.timeout)}",
            tuple(_entry_id(flow.entries[flow.index(n)]) for n in s.steps),
        )
        for s in flow.segments
    )
    comments = [
        f"workflow deadline {format_duration(flow.deadline)}: then timed_out, "
        "completed steps compensated"
    ]
    comments += [
        f"sla {r.name}: {r.statistic} of {r.metric} ({r.state or r.step}) over "
        f"{format_duration(r.window)} above {format_duration(r.above)}"
        for r in flow.sla
    ]
    return StateGraph(
        title=f"{flow.label} (deadline {format_duration(flow.deadline)})",
        nodes=tuple(nodes),
        edges=tuple(edges),
        clusters=clusters,
        comments=tuple(comments),
    )


def _gate_label(gate: Gate, outcome: Literal["approve", "reject"]) -> str:
    label = "approved" if outcome == "approve" else "rejected"
    at_deadline = f"deadline {format_duration(gate.deadline)}"
    if gate.default == outcome:
        return f"{label} or {at_deadline}"
    if outcome == "reject" and gate.default == "fail":
        return f"{label} or {at_deadline} (fail)"
    return label


def render(flow: Flow, *, format: GraphFormat = "mermaid") -> str:
    """``flow``'s state machine as Mermaid or Graphviz (dot) text."""
    graph = state_graph(flow)
    return to_mermaid(graph) if format == "mermaid" else to_dot(graph)


_MERMAID_SHAPES = {
    "start": ('(["', '"])'),
    "step": ('("', '")'),
    "gate": ('{{"', '"}}'),
    "undo": ('[/"', '"/]'),
    "end": ('((("', '")))'),
}
_MERMAID_ARROWS = {"forward": "-->", "approve": "-->", "reject": "-.->", "fail": "-.->", "undo": "==>"}
_MERMAID_CLASSES = {
    "step": "fill:#e8f0fe,stroke:#4a6fa5",
    "gate": "fill:#fff4ce,stroke:#b58900",
    "undo": "fill:#fdecea,stroke:#c0392b",
    "end": "fill:#eeeeee,stroke:#555555",
}


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


def to_mermaid(graph: StateGraph) -> str:
    """A Mermaid flowchart (renders on GitHub and in most Markdown viewers)."""
    out = ["---", f"title: {graph.title}", "---", "flowchart LR"]
    out += [f"    %% {c}" for c in graph.comments]
    clustered = {m for c in graph.clusters for m in c.members}

    def declare(node: Node, indent: str) -> str:
        opening, closing = _MERMAID_SHAPES[node.kind]
        label = "<br/>".join(_mermaid_text(line) for line in node.lines)
        return f"{indent}{node.id}{opening}{label}{closing}"

    for node in graph.nodes:
        if node.id not in clustered:
            out.append(declare(node, "    "))
    for cluster in graph.clusters:
        out.append(f'    subgraph {cluster.id}["{_mermaid_text(cluster.label)}"]')
        out += [declare(graph.node(m), "        ") for m in cluster.members]
        out.append("    end")
    for edge in graph.edges:
        arrow = _MERMAID_ARROWS[edge.kind]
        out.append(f'    {edge.source} {arrow}|"{_mermaid_text(edge.label)}"| {edge.target}')
    for kind, style in _MERMAID_CLASSES.items():
        members = [n.id for n in graph.nodes if n.kind == kind]
        if members:
            out.append(f"    classDef {kind} {style}")
            out.append(f"    class {','.join(members)} {kind}")
    return "\n".join(out) + "\n"


_DOT_NODES = {
    "start": 'shape=oval, style=filled, fillcolor="#eeeeee"',
    "step": 'shape=box, style="rounded,filled", fillcolor="#e8f0fe"',
    "gate": 'shape=hexagon, style=filled, fillcolor="#fff4ce"',
    "undo": 'shape=parallelogram, style=filled, fillcolor="#fdecea"',
    "end": 'shape=doublecircle, style=filled, fillcolor="#eeeeee"',
}
_DOT_EDGES = {
    "forward": "",
    "approve": ', color="#2e7d32"',
    "reject": ', style=dashed, color="#c0392b"',
    "fail": ', style=dashed, color="#c0392b"',
    "undo": ', style=bold, color="#c0392b"',
}


def _dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(graph: StateGraph) -> str:
    """A Graphviz digraph (``dot -Tsvg flow.dot -o flow.svg``)."""
    out = [
        f"digraph {_dot_text(graph.title.split(' (')[0])} {{",
        f"    graph [rankdir=LR, labelloc=t, fontname=Helvetica, label={_dot_text(graph.title)}];",
        "    node [fontname=Helvetica, fontsize=11];",
        "    edge [fontname=Helvetica, fontsize=9];",
    ]
    out += [f"    // {c}" for c in graph.comments]
    clustered = {m for c in graph.clusters for m in c.members}

    def declare(node: Node, indent: str) -> str:
        label = _dot_text("\n".join(node.lines)).replace("\n", "\\n")
        return f"{indent}{node.id} [label={label}, {_DOT_NODES[node.kind]}];"

    for node in graph.nodes:
        if node.id not in clustered:
            out.append(declare(node, "    "))
    for cluster in graph.clusters:
        out.append(f"    subgraph cluster_{cluster.id} {{")
        out.append(f"        label={_dot_text(cluster.label)}; style=dashed;")
        out += [declare(graph.node(m), "        ") for m in cluster.members]
        out.append("    }")
    for edge in graph.edges:
        out.append(
            f"    {edge.source} -> {edge.target} "
            f"[label={_dot_text(edge.label)}{_DOT_EDGES[edge.kind]}];"
        )
    out.append("}")
    return "\n".join(out) + "\n"
