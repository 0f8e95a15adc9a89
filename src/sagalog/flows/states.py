"""The states a workflow moves through: the vocabulary flows and the tracker share.

A flow names states in its SLA rules ("median time in pending_approval"), and the
tracker publishes every move between them as a ``StateTransition``; both read the
names from here so a rule can never name a state no workflow enters.
"""

from __future__ import annotations

import enum


class WorkflowState(enum.StrEnum):
    """Where a workflow is; the value is what ``StateTransition.to_state`` carries."""

    QUEUED = "queued"
    """Admitted later: the flow's limit on active workflows is reached."""
    INITIATED = "initiated"
    RUNNING = "running"
    AWAITING_INPUT = "awaiting_input"
    PENDING_APPROVAL = "pending_approval"
    APPROVED = "approved"
    COMMITTED = "committed"
    COMPLETED = "completed"
    FAILED = "failed"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    TIMED_OUT = "timed_out"


TERMINAL_STATES = frozenset(
    {
        WorkflowState.COMPLETED,
        WorkflowState.FAILED,
        WorkflowState.COMPENSATED,
        WorkflowState.TIMED_OUT,
    }
)
"""States a workflow never leaves: time spent in them is not a duration an SLA can bound."""

GATE_STATES = frozenset({WorkflowState.PENDING_APPROVAL, WorkflowState.APPROVED})
"""States only a flow with a human gate can enter."""

COMPENSATION_STATES = frozenset({WorkflowState.COMPENSATING, WorkflowState.COMPENSATED})
"""States only a flow with something to undo (a compensation or a follow-up) can enter."""

WAIT_STATES = frozenset({WorkflowState.AWAITING_INPUT})
"""States only a flow with a wait for outside events can enter."""
