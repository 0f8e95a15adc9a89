"""The drawn state machine: forward edges, gate outcomes, failures and the undo chain."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.graph import render, state_graph, to_dot, to_mermaid
from sagalog.flows.loader import load_flow_file
from sagalog.flows.model import Flow
from sagalog.topology.loader import load_topology


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    return load_flow_file(
        repo_root / "topology/flows/procurement.v1.yaml", catalog=catalog, topology=topology
    )


def edges(flow: Flow) -> set[tuple[str, str, str, str]]:
    return {(e.source, e.target, e.label, e.kind) for e in state_graph(flow).edges}


def test_forward_edges_follow_the_flow_and_the_gate_approves(flow: Flow) -> None:
    found = edges(flow)
    assert {
        ("start", "step_classify_request", "RequestSubmitted", "forward"),
        ("step_score_risk", "step_reserve_budget", "RiskScored", "forward"),
        ("step_reserve_budget", "gate_manager_approval", "BudgetReserved", "forward"),
        ("gate_manager_approval", "step_create_purchase_order", "approved", "approve"),
        ("step_notify_vendor", "completed", "VendorNotified", "forward"),
    } <= found


def test_failures_lead_into_the_compensation_chain_which_runs_backwards(flow: Flow) -> None:
    found = edges(flow)
    assert {
        # nothing to undo before the budget: a failure there just fails
        ("step_score_risk", "failed", "StepFailed or timeout 10m", "fail"),
        ("step_reserve_budget", "failed", "StepFailed or timeout 10m", "fail"),
        # rejected, or nobody decided by the deadline (default reject)
        ("gate_manager_approval", "undo_reserve_budget", "rejected or deadline 3d", "reject"),
        ("step_create_purchase_order", "undo_reserve_budget", "StepFailed or timeout 15m", "fail"),
        ("step_notify_vendor", "undo_create_purchase_order", "StepFailed or timeout 15m", "fail"),
        ("undo_create_purchase_order", "undo_reserve_budget", "PurchaseOrderCancelled", "undo"),
        ("undo_reserve_budget", "compensated", "BudgetReleased", "undo"),
    } <= found


def test_every_edge_joins_declared_nodes(flow: Flow) -> None:
    graph = state_graph(flow)
    ids = [n.id for n in graph.nodes]
    assert len(ids) == len(set(ids))
    assert {e.source for e in graph.edges} | {e.target for e in graph.edges} <= set(ids)
    assert {m for c in graph.clusters for m in c.members} <= set(ids)


def test_nodes_carry_agents_timeouts_and_the_gate_chain(flow: Flow) -> None:
    graph = state_graph(flow)
    assert graph.node("step_score_risk").lines == ("score_risk", "risk-agent", "timeout 10m")
    assert graph.node("gate_manager_approval").lines == (
        "gate manager_approval",
        "managers@procurement.example",
        "after 1d: director@procurement.example",
        "deadline 3d: reject",
    )
    assert graph.node("undo_reserve_budget").lines == (
        "release_budget",
        "undo reserve_budget",
        "timeout 30m",
    )
    assert graph.title == "procurement v1 (deadline 5d)"
    assert any("send_correction_notice is never requested" in c for c in graph.comments)


def test_a_default_approve_or_fail_is_drawn_on_its_edge(flow: Flow) -> None:
    def gate_edges(default: str) -> set[tuple[str, str, str, str]]:
        entries = tuple(
            e.model_copy(update={"default": default}) if e.name == "manager_approval" else e
            for e in flow.entries
        )
        changed = flow.model_copy(update={"entries": entries})
        return {e for e in edges(changed) if e[0] == "gate_manager_approval"}

    assert {(e[2], e[3]) for e in gate_edges("approve")} == {
        ("approved or deadline 3d", "approve"),
        ("rejected", "reject"),
    }
    assert {(e[2], e[3]) for e in gate_edges("fail")} == {
        ("approved", "approve"),
        ("rejected or deadline 3d (fail)", "reject"),
    }


def test_mermaid(flow: Flow) -> None:
    text = render(flow)
    lines = text.splitlines()
    assert lines[:4] == ["---", "title: procurement v1 (deadline 5d)", "---", "flowchart LR"]
    assert (
        '    gate_manager_approval{{"gate manager_approval<br/>managers@procurement.example'
        '<br/>after 1d: director@procurement.example<br/>deadline 3d: reject"}}'
    ) in lines
    assert '    subgraph segment_assessment["assessment: timeout 30m"]' in lines
    assert '        step_score_risk("score_risk<br/>risk-agent<br/>timeout 10m")' in lines
    assert '    step_reserve_budget -->|"BudgetReserved"| gate_manager_approval' in lines
    assert '    gate_manager_approval -.->|"rejected or deadline 3d"| undo_reserve_budget' in lines
    assert (
        '    undo_create_purchase_order ==>|"PurchaseOrderCancelled"| undo_reserve_budget' in lines
    )
    assert (
        "    %% sla approvals_waiting: p50 of time_in_state (pending_approval) over 1h above 4h"
        in lines
    )
    # "end" closes a Mermaid subgraph: no class or node may be called that.
    assert not [line for line in lines if re.search(r"\bend\b", line) and line.strip() != "end"]
    assert text.count("subgraph") == text.count("\n    end\n") == 2
    assert text == to_mermaid(state_graph(flow))


def test_dot(flow: Flow) -> None:
    text = render(flow, format="dot")
    lines = text.splitlines()
    assert lines[0] == 'digraph "procurement v1" {' and lines[-1] == "}"
    assert text.count("{") == text.count("}")
    assert "    subgraph cluster_segment_fulfilment {" in lines
    assert (
        '    gate_manager_approval -> step_create_purchase_order [label="approved", '
        'color="#2e7d32"];'
    ) in lines
    assert (
        '    undo_reserve_budget -> compensated [label="BudgetReleased", style=bold, '
        'color="#c0392b"];'
    ) in lines
    assert (
        '    gate_manager_approval [label="gate manager_approval\\nmanagers@procurement.example'
        '\\nafter 1d: director@procurement.example\\ndeadline 3d: reject", shape=hexagon, '
        'style=filled, fillcolor="#fff4ce"];'
    ) in lines
    assert text == to_dot(state_graph(flow))
