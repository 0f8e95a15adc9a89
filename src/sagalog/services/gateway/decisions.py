"""Whether a person's decision may be published: the token checks, as pure functions.

The tracker is the authority: it verifies every ``GateDecided`` again and ignores
one that does not fit. The gateway checks first so that a person gets an answer
("forged", "expired", "already decided") instead of an event silently ignored, and
so that nothing that would be refused reaches the workflow's log.

Idempotency: a decision's event id is derived from the token and the decision, so
the same click posted twice carries the same ``ce_id`` (the tracker drops the second
as a duplicate even across gateway replicas), and the gateway's ledger answers the
repeat without publishing again.
"""

from __future__ import annotations

import enum
import uuid

from sagalog.events import GateDecision
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.services.gateway.exceptions import (
    ExpiredToken,
    ForgedToken,
    NoOpenGate,
    UnknownWorkflow,
)
from sagalog.tracker.gates import verify_gate_token
from sagalog.tracker.record import GateProgress, WorkflowRecord

SOURCE = "sagalog/gateway"
"""The ``ce_source`` of what the gateway publishes."""

_DECISION_IDS = uuid.UUID("6f1d3a52-3c1e-5b7a-9a55-2f0c6f5b9e10")
"""The namespace of decision event ids (uuid5); fixed forever, or repeats stop matching."""

OTHER_GATE_ATTEMPTS = 8
"""How many openings of the flow's *other* gates a stale token is tried against."""


class Decision(enum.StrEnum):
    """What a person answers, as the API spells it."""

    APPROVE = "approve"
    REJECT = "reject"

    @property
    def gate_decision(self) -> GateDecision:
        return GateDecision.APPROVED if self is Decision.APPROVE else GateDecision.REJECTED


def decision_event_id(token: str, decision: Decision) -> str:
    """The ``ce_id`` of the ``GateDecided`` for this token and answer: the same every time."""
    return str(uuid.uuid5(_DECISION_IDS, f"gate-decision\x00{token}\x00{decision.value}"))


def cancellation_event_id(workflow_id: str) -> str:
    """The ``ce_id`` of a workflow's ``WorkflowCancelled``: one per workflow, so a repeated
    or retried cancellation is taken once."""
    return str(uuid.uuid5(_DECISION_IDS, f"cancellation\x00{workflow_id}"))


def check_decision(
    record: WorkflowRecord | None,
    *,
    workflow_id: str,
    token: str,
    secret: bytes,
    flow: Flow | None,
) -> GateProgress:
    """The open gate ``token`` may decide, or the reason it may not.

    Raises:
        UnknownWorkflow: no such workflow (404).
        NoOpenGate: the workflow waits for no decision now (409).
        ForgedToken: the token was never issued for this workflow (403).
        ExpiredToken: the token is genuine but for an earlier opening of the gate or
            for another gate of the flow (409).
    """
    if record is None:
        raise UnknownWorkflow(
            f"no workflow '{workflow_id}' is known to the gateway; check the id (it is the "
            "Kafka key of the workflow's events), or retry in a few seconds if it just started",
            workflow_id=workflow_id,
        )
    gate = record.gate
    if gate is None or record.state is not WorkflowState.PENDING_APPROVAL:
        where = f"at step '{record.current}'" if record.current else "at no step"
        reached = f"gate '{gate.gate}' was already decided or closed" if gate else where
        raise NoOpenGate(
            f"workflow '{workflow_id}' is {record.state.value} and waits for no decision "
            f"({reached}); nothing was published",
            workflow_id=workflow_id,
            state=record.state.value,
        )

    def signed(name: str, attempt: int) -> bool:
        return verify_gate_token(
            secret, token, workflow_id=record.workflow_id, gate=name, attempt=attempt
        )

    if signed(gate.gate, gate.attempt):
        return gate
    older = next((a for a in range(gate.attempt - 1, 0, -1) if signed(gate.gate, a)), None)
    if older is not None:
        raise ExpiredToken(
            f"expired token: it is for opening {older} of gate '{gate.gate}', which is now at "
            f"opening {gate.attempt}; use the token of the current opening (GET /v1/gates)",
            workflow_id=workflow_id,
            gate=gate.gate,
            token_attempt=older,
            attempt=gate.attempt,
        )
    for other in (*flow.gates, *flow.budget_gates) if flow is not None else ():
        if other.name != gate.gate and any(
            signed(other.name, a) for a in range(1, OTHER_GATE_ATTEMPTS + 1)
        ):
            raise ExpiredToken(
                f"expired token: it is for gate '{other.name}', but the open gate of "
                f"workflow '{workflow_id}' is '{gate.gate}'; use its token (GET /v1/gates)",
                workflow_id=workflow_id,
                gate=gate.gate,
                token_gate=other.name,
            )
    raise ForgedToken(
        f"the token does not belong to workflow '{workflow_id}': it was not issued by the "
        "tracker (or the gateway's GATEWAY_GATE_SECRET differs from the tracker's); copy the "
        "token from the gate's notification or from GET /v1/gates",
        workflow_id=workflow_id,
    )
