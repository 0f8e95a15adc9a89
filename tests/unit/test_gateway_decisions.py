"""The gateway's checks of a gate decision, before anything is published."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.events import GateDecision
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.services.gateway.decisions import Decision, check_decision, decision_event_id
from sagalog.services.gateway.exceptions import (
    ExpiredToken,
    ForgedToken,
    NoOpenGate,
    UnknownWorkflow,
)
from sagalog.tracker import gate_token

from .gateway_fixtures import BEFORE_GATE, SECRET, at_gate, reference_flow, tracked


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    return reference_flow(repo_root, catalog)


def test_the_token_of_the_open_gate_is_accepted(flow: Flow) -> None:
    record = at_gate(flow)
    gate = check_decision(
        record, workflow_id="wf-1", token=record.gate.token, secret=SECRET, flow=flow
    )
    assert (gate.gate, gate.attempt) == ("manager_approval", 1)


def test_an_unknown_workflow_is_404(flow: Flow) -> None:
    with pytest.raises(UnknownWorkflow, match="no workflow 'nope'") as caught:
        check_decision(None, workflow_id="nope", token="g1.x", secret=SECRET, flow=None)
    assert caught.value.status == 404


def test_a_workflow_before_its_gate_has_no_open_gate(flow: Flow) -> None:
    record = tracked(flow, "wf-1", *BEFORE_GATE[:2]).record("wf-1")
    token = gate_token(SECRET, "wf-1", "manager_approval", 1)
    with pytest.raises(NoOpenGate, match="is running and waits for no decision") as caught:
        check_decision(record, workflow_id="wf-1", token=token, secret=SECRET, flow=flow)
    assert caught.value.status == 409


def test_a_decided_gate_is_no_longer_open(flow: Flow) -> None:
    tracker = tracked(flow, "wf-1", *BEFORE_GATE)
    token = tracker.record("wf-1").gate.token
    tracker.send(
        "sagalog.v1.GateDecided",
        "wf-1",
        gate="manager_approval",
        token=token,
        decision="APPROVED",
        decided_by="ann",
    )
    record = tracker.record("wf-1")
    assert record.state is not WorkflowState.PENDING_APPROVAL
    with pytest.raises(NoOpenGate, match="gate 'manager_approval' was already decided"):
        check_decision(record, workflow_id="wf-1", token=token, secret=SECRET, flow=flow)


@pytest.mark.parametrize(
    "token",
    [
        gate_token(b"another-secret-of-32-bytes-long!", "wf-1", "manager_approval", 1),
        gate_token(SECRET, "wf-2", "manager_approval", 1),  # another workflow's
        "g1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "not a token at all",
    ],
)
def test_a_forged_token_is_403(flow: Flow, token: str) -> None:
    record = at_gate(flow)
    with pytest.raises(ForgedToken, match="does not belong to workflow 'wf-1'") as caught:
        check_decision(record, workflow_id="wf-1", token=token, secret=SECRET, flow=flow)
    assert caught.value.status == 403


def test_the_token_of_an_earlier_opening_is_expired(flow: Flow) -> None:
    record = at_gate(flow)
    reopened = record.model_copy(
        update={"gate": record.gate.model_copy(update={"attempt": 2, "token": "g1.new"})}
    )
    old = gate_token(SECRET, "wf-1", "manager_approval", 1)
    with pytest.raises(ExpiredToken, match="for opening 1 of gate 'manager_approval'") as caught:
        check_decision(reopened, workflow_id="wf-1", token=old, secret=SECRET, flow=flow)
    assert caught.value.status == 409
    assert caught.value.detail == {
        "workflow_id": "wf-1",
        "gate": "manager_approval",
        "token_attempt": 1,
        "attempt": 2,
    }


def test_the_token_of_another_gate_of_the_flow_is_expired(flow: Flow) -> None:
    gate = flow.gates[0]
    two_gates = flow.model_copy(
        update={"entries": (*flow.entries, gate.model_copy(update={"name": "cfo_approval"}))}
    )
    record = at_gate(flow)
    other = gate_token(SECRET, "wf-1", "cfo_approval", 1)
    with pytest.raises(ExpiredToken, match="for gate 'cfo_approval'"):
        check_decision(record, workflow_id="wf-1", token=other, secret=SECRET, flow=two_gates)


def test_the_decision_event_id_is_fixed_by_token_and_decision() -> None:
    one = decision_event_id("g1.abc", Decision.APPROVE)
    assert one == decision_event_id("g1.abc", Decision.APPROVE)
    assert one != decision_event_id("g1.abc", Decision.REJECT)
    assert one != decision_event_id("g1.abd", Decision.APPROVE)
    # Pinned: a change would make a repeat after an upgrade publish a second event.
    assert decision_event_id("g1.abc", Decision.APPROVE) == "791319d3-5e7d-5984-9555-8474db6d09a5"


def test_decisions_map_to_the_event_enum() -> None:
    assert Decision.APPROVE.gate_decision is GateDecision.APPROVED
    assert Decision.REJECT.gate_decision is GateDecision.REJECTED
