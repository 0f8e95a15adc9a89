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

from sagalog.durations import format_duration
from sagalog.flows.model import Flow, Gate, Step, Wait
from sagalog.flows.states import WorkflowState

GraphFormat = Literal["mermaid", "dot"]
NodeKind = Literal["start", "step", "gate", "wait", "undo", "end"]
EdgeKind = Literal["forward", "approve", "reject", "fail", "undo"]

START = "start"
# The end nodes are the terminal states they stand for.
COMPLETED, COMPENSATED, FAILED = (
    WorkflowState.COMPLETED.value,
    WorkflowState.COMPENSATED.value,
    WorkflowState.FAILED.value,
)


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


def _entry_id(entry: Step | Gate | Wait) -> str:
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

    failures: list[Edge] = []
    for i, entry in enumerate(entries):
        nodes.append(_entry_node(entry))
        if i == 0:
            edges.append(Edge(START, _entry_id(entry), _short(flow.starts_on), "forward"))
        else:
            edges.append(_forward(entries[i - 1], _entry_id(entry)))
        if isinstance(entry, Step):
            failure = f"{_events(entry.fails_on)} or timeout {format_duration(entry.timeout)}"
            failures.append(Edge(_entry_id(entry), undo_target(i), failure, "fail"))
        elif isinstance(entry, Wait):
            if entry.default == "fail":
                late = f"timeout {format_duration(entry.timeout)} (fail)"
                failures.append(Edge(_entry_id(entry), undo_target(i), late, "fail"))
        else:
            failures.append(
                Edge(_entry_id(entry), undo_target(i), _gate_label(entry, "reject"), "reject")
            )
    edges.append(_forward(entries[-1], COMPLETED))
    edges += failures

    # Undone one at a time, latest first; a last step has nothing after it to fail.
    chain = [s for j, s in enumerate(entries[:-1]) if j in undoable and isinstance(s, Step)]
    for k, step in enumerate(chain):
        undo = step.undo
        assert undo is not None  # chain holds undoable steps only
        role = "undo" if step.compensation is not None else "follow-up of"
        lines = (
            step.undo_action or "",
            f"{role} {step.name}",
            f"timeout {format_duration(undo.timeout)}",
        )
        nodes.append(Node(f"undo_{step.name}", lines, "undo"))
        target = f"undo_{chain[k - 1].name}" if k else COMPENSATED
        edges.append(Edge(f"undo_{step.name}", target, _events(undo.completes_on), "undo"))
    nodes.append(Node(COMPLETED, (COMPLETED,), "end"))
    targets = {e.target for e in edges}
    if COMPENSATED in targets:
        nodes.append(Node(COMPENSATED, (COMPENSATED,), "end"))
    if FAILED in targets:
        nodes.append(Node(FAILED, (FAILED,), "end"))

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
    last = entries[-1]
    if isinstance(last, Step) and last.undo_action:
        comments.append(
            f"{last.name} is last: nothing after it can fail, so {last.undo_action} "
            "is never requested"
        )
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


def _entry_node(entry: Step | Gate | Wait) -> Node:
    if isinstance(entry, Step):
        lines = (entry.name, entry.agent, f"timeout {format_duration(entry.timeout)}")
        return Node(_entry_id(entry), lines, "step")
    if isinstance(entry, Wait):
        wait_lines = [f"wait {entry.name}", f"{entry.mode} of:"]
        wait_lines += [f"{s.name}: {s.webhook or _short(s.event)}" for s in entry.signals]
        wait_lines.append(f"timeout {format_duration(entry.timeout)}: {entry.default}")
        return Node(_entry_id(entry), tuple(wait_lines), "wait")
    gate_lines = [f"gate {entry.name}", entry.assignee]
    gate_lines += [f"after {format_duration(e.after)}: {e.to}" for e in entry.escalation]
    gate_lines.append(f"deadline {format_duration(entry.deadline)}: {entry.default}")
    return Node(_entry_id(entry), tuple(gate_lines), "gate")


def _forward(entry: Step | Gate | Wait, target: str) -> Edge:
    """The edge taken when ``entry`` completes."""
    if isinstance(entry, Gate):
        return Edge(_entry_id(entry), target, _gate_label(entry, "approve"), "approve")
    if isinstance(entry, Wait):
        late = (
            f" or timeout {format_duration(entry.timeout)}" if entry.default == "continue" else ""
        )
        return Edge(_entry_id(entry), target, f"{entry.mode} signals{late}", "forward")
    return Edge(_entry_id(entry), target, _events(entry.completes_on), "forward")


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
    "wait": ('[["', '"]]'),
    "undo": ('[/"', '"/]'),
    "end": ('((("', '")))'),
}
_MERMAID_ARROWS = {
    "forward": "-->",
    "approve": "-->",
    "reject": "-.->",
    "fail": "-.->",
    "undo": "==>",
}
# Class names avoid Mermaid's keywords ("end" would close a subgraph).
_MERMAID_CLASSES = {
    "step": ("stepNode", "fill:#e8f0fe,stroke:#4a6fa5"),
    "gate": ("gateNode", "fill:#fff4ce,stroke:#b58900"),
    "wait": ("waitNode", "fill:#e6f4ea,stroke:#2e7d32"),
    "undo": ("undoNode", "fill:#fdecea,stroke:#c0392b"),
    "end": ("terminalNode", "fill:#eeeeee,stroke:#555555"),
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
    for kind, (name, style) in _MERMAID_CLASSES.items():
        members = [n.id for n in graph.nodes if n.kind == kind]
        if members:
            out.append(f"    classDef {name} {style}")
            out.append(f"    class {','.join(members)} {name}")
    return "\n".join(out) + "\n"


_DOT_NODES = {
    "start": 'shape=oval, style=filled, fillcolor="#eeeeee"',
    "step": 'shape=box, style="rounded,filled", fillcolor="#e8f0fe"',
    "gate": 'shape=hexagon, style=filled, fillcolor="#fff4ce"',
    "wait": 'shape=box3d, style=filled, fillcolor="#e6f4ea"',
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
