"""``sagalog.testing.TrackerHarness``: the production processor, a manual clock, echoes.

On the integration tests' orders flow (see ``test_tracker_processor``): reserve_budget
times out after 10m, the gate manager_approval escalates after 24h and rejects by
default at 72h.
"""

from __future__ import annotations

import pytest

from sagalog.events import GateDecided, StateTransition
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import WorkflowState
from sagalog.testing import TrackerHarness
from sagalog.tracker import Outcome
from sagalog.tracker.forward import DEADLINE_DECIDER

from .test_tracker_processor import (
    CLASSIFIED,
    MIN,
    RESERVED,
    RETRIEVED,
    SECRET,
    SUBMITTED,
    T0,
    H,
    registry,  # noqa: F401 (a fixture)
)


def test_advance_fires_each_timer_at_its_own_due_time_and_stops_at_the_target(
    registry: FlowRegistry,  # noqa: F811
) -> None:
    tracker = TrackerHarness(registry, secret=SECRET, now_ms=T0)
    tracker.send(SUBMITTED, "wf-1")
    assert tracker.next_due_ms() == T0 + 10 * MIN  # reserve_budget's timeout comes first
    [fired] = tracker.advance(15 * MIN)  # the compensation it asks for times out at 40m
    assert fired.outcome is Outcome.APPLIED and tracker.now_ms == T0 + 15 * MIN
    assert tracker.state("wf-1") is WorkflowState.COMPENSATING
    [moved] = [
        p
        for p in tracker.published
        if isinstance(p.event, StateTransition) and p.event.to_state == "compensating"
    ]
    assert moved.time_ms == T0 + 10 * MIN  # decided when it was due, not when the clock stopped
    assert [t.key for t in tracker.timers] == [t.key for t in tracker.record("wf-1").timers]


def test_nothing_fires_before_its_due_time(registry: FlowRegistry) -> None:  # noqa: F811
    tracker = TrackerHarness(registry, secret=SECRET, now_ms=T0)
    tracker.send(SUBMITTED, "wf-1")
    assert tracker.advance(10 * MIN - 1) == []
    assert tracker.state("wf-1") is WorkflowState.RUNNING
    assert tracker.fire_next() is not None and tracker.now_ms == T0 + 10 * MIN


@pytest.mark.parametrize("echo", [True, False])
def test_its_own_gate_default_is_read_back_as_the_service_reads_it(
    registry: FlowRegistry,  # noqa: F811
    echo: bool,
) -> None:
    """A gate default's ``GateDecided`` is an input when read back (a duplicate: its id is
    remembered); the ``GateOpened`` it published is only sealed by the service, never
    decided again."""
    tracker = TrackerHarness(registry, secret=SECRET, now_ms=T0, echo=echo)
    for event_type in (SUBMITTED, RESERVED, CLASSIFIED, RETRIEVED):
        tracker.send(event_type, "wf-1")
    assert tracker.state("wf-1") is WorkflowState.PENDING_APPROVAL
    tracker.advance(72 * H)
    assert tracker.state("wf-1") is WorkflowState.COMPENSATING
    assert [e.decided_by for e in tracker.events_of(GateDecided.event_type)] == [DEADLINE_DECIDER]
    inputs = sum(tracker.outcomes.values())
    assert tracker.outcomes[Outcome.DUPLICATE] == (1 if echo else 0)
    assert inputs == 4 + 2 + (1 if echo else 0)  # four events, escalation and deadline timers
