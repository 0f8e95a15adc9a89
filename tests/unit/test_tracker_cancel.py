"""An operator's cancellation (``WorkflowCancelled``): the tracker undoes what the workflow
did, the step running included, and the end names who cancelled it and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.events import CompensationRequested
from sagalog.flows.model import GATE_DECIDED, WORKFLOW_CANCELLED
from sagalog.flows.states import WorkflowState
from sagalog.testing import TrackerHarness
from sagalog.tracker import Decision, Outcome, gate_token
from sagalog.tracker.record import CompensationCause

SECRET = b"cancel-secret-0123"
FORWARD = [
    "procurement.v1.RequestClassified",
    "procurement.v1.PoliciesRetrieved",
    "procurement.v1.RiskScored",
]


@pytest.fixture
def tracker(repo_root: Path) -> TrackerHarness:
    return TrackerHarness.for_project(repo_root, secret=SECRET, now_ms=1_800_000_000_000)


def cancel(tracker: TrackerHarness, workflow_id: str) -> Decision:
    return tracker.send(
        WORKFLOW_CANCELLED, workflow_id, reason="duplicate of PR-7", requested_by="ops@example.com"
    )


def requested(tracker: TrackerHarness, workflow_id: str) -> list[str]:
    return [
        p.event.step
        for p in tracker.published
        if isinstance(p.event, CompensationRequested) and p.workflow_id == workflow_id
    ]


def test_a_cancelled_workflow_undoes_the_running_step_first_then_ends_compensated(
    tracker: TrackerHarness,
) -> None:
    tracker.send("procurement.v1.RequestSubmitted", "wf-1")
    for event_type in FORWARD:
        tracker.send(event_type, "wf-1")
    assert tracker.record("wf-1").current == "reserve_budget"
    decision = cancel(tracker, "wf-1")
    assert decision.outcome is Outcome.APPLIED
    record = tracker.record("wf-1")
    assert record.state is WorkflowState.COMPENSATING
    assert record.compensation is not None
    assert record.compensation.cause is CompensationCause.CANCELLATION
    # The budget may have been reserved without saying so yet: it is released.
    assert requested(tracker, "wf-1") == ["reserve_budget"]
    tracker.send("procurement.v1.BudgetReleased", "wf-1")
    done = tracker.record("wf-1")
    assert done.state is WorkflowState.COMPENSATED
    assert done.terminal_reason == (
        "cancelled by ops@example.com: duplicate of PR-7; undone: reserve_budget"
    )


def test_a_workflow_at_its_gate_is_cancelled_like_a_rejection_and_the_token_dies(
    tracker: TrackerHarness,
) -> None:
    tracker.send("procurement.v1.RequestSubmitted", "wf-2")
    for event_type in [*FORWARD, "procurement.v1.BudgetReserved"]:
        tracker.send(event_type, "wf-2")
    assert tracker.state("wf-2") is WorkflowState.PENDING_APPROVAL
    cancel(tracker, "wf-2")
    assert requested(tracker, "wf-2") == ["reserve_budget"]
    late = tracker.send(
        GATE_DECIDED,
        "wf-2",
        gate="manager_approval",
        token=gate_token(SECRET, "wf-2", "manager_approval", 1),
        decision="APPROVED",
        decided_by="ann",
    )
    assert late.outcome is Outcome.REJECTED


def test_cancelling_twice_or_after_the_end_changes_nothing(tracker: TrackerHarness) -> None:
    tracker.send("procurement.v1.RequestSubmitted", "wf-3")
    cancel(tracker, "wf-3")  # classify_request has no effect: nothing to undo
    record = tracker.record("wf-3")
    assert record.state is WorkflowState.FAILED
    assert record.terminal_reason == (
        "cancelled by ops@example.com: duplicate of PR-7; nothing to undo"
    )
    assert cancel(tracker, "wf-3").outcome is Outcome.IGNORED
    tracker.send("procurement.v1.RequestSubmitted", "wf-4")
    for event_type in [*FORWARD]:
        tracker.send(event_type, "wf-4")
    cancel(tracker, "wf-4")
    again = cancel(tracker, "wf-4")
    assert again.outcome is Outcome.STALE
    assert requested(tracker, "wf-4") == ["reserve_budget"]
