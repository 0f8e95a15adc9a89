"""Admission control: a per-flow limit on active workflows, the most urgent admitted first."""

from __future__ import annotations

import pytest

from sagalog.errors import ConfigurationError
from sagalog.flows.states import WorkflowState
from sagalog.priority import Priority
from sagalog.tracker.admission import ACTIVE_STATES, Admission, QueuedWorkflow


def queued(workflow_id: str, priority: Priority, at_ms: int) -> QueuedWorkflow:
    return QueuedWorkflow.of(workflow_id, priority=priority, queued_at_ms=at_ms)


WAITING = [
    queued("old-normal", Priority.NORMAL, 100),
    queued("new-urgent", Priority.URGENT, 900),
    queued("new-normal", Priority.NORMAL, 500),
    queued("old-urgent", Priority.URGENT, 300),
    queued("low", Priority.LOW, 1),
]


def test_active_states_are_the_ones_between_admission_and_the_end() -> None:
    assert WorkflowState.QUEUED not in ACTIVE_STATES
    assert {WorkflowState.RUNNING, WorkflowState.PENDING_APPROVAL, WorkflowState.COMPENSATING} <= (
        ACTIVE_STATES
    )
    assert not ACTIVE_STATES & {WorkflowState.COMPLETED, WorkflowState.FAILED}


def test_a_new_workflow_starts_while_slots_are_free_and_nobody_waits() -> None:
    admission = Admission(limit=2)
    assert admission.admits_new(active=1, queued=0)
    assert not admission.admits_new(active=2, queued=0)
    assert not admission.admits_new(active=1, queued=3)  # it may not overtake the queue
    assert Admission().admits_new(active=10**6, queued=0)  # no limit


def test_a_freed_slot_goes_to_the_highest_priority_then_the_oldest() -> None:
    admission = Admission(limit=3)
    assert admission.next_up(WAITING) == WAITING[3]  # old-urgent
    assert [q.workflow_id for q in admission.to_admit(WAITING, active=1)] == [
        "old-urgent",
        "new-urgent",
    ]
    assert admission.to_admit(WAITING, active=3) == []
    assert admission.next_up([]) is None
    assert len(Admission().to_admit(WAITING, active=50)) == len(WAITING)


def test_the_queue_key_orders_an_ordered_table_the_same_way() -> None:
    assert [q.workflow_id for q in sorted(WAITING, key=lambda q: q.key)] == [
        q.workflow_id for q in sorted(WAITING)
    ]
    assert sorted(WAITING, key=lambda q: q.key)[-1].workflow_id == "low"


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="set it to 1 or more"):
        Admission(limit=0)
