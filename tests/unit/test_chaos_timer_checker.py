"""The clock rounds' judge of timers, on hand-made transitions (tests/chaos/timer_checker.py)."""

from __future__ import annotations

import pytest

from chaos.checker import Transition
from chaos.timer_checker import early, firings, twice
from sagalog.tracker.timers import TimerKind, timer_key

DUE = 1_000_000
DEADLINE = "timer:" + timer_key(
    due_ms=DUE, workflow_id="wf-1", kind=TimerKind.GATE_DEADLINE, ref="manager_approval#1"
)


def move(event_id: str, to: str, cause: str, at_ms: int | None) -> Transition:
    return Transition("wf-1", event_id, "x", to, None, cause_event_id=cause, at_ms=at_ms)


def test_a_timer_that_fires_at_or_after_its_due_time_is_neither_early_nor_twice() -> None:
    found = firings(
        {
            "wf-1": [
                move("t1", "pending_approval", "ev-1", DUE - 5000),
                move("t2", "compensating", DEADLINE, DUE),
                move("t3", "compensated", "ev-2", DUE + 10),
            ]
        }
    )
    assert [(f.timer_key, f.due_ms, f.at_ms) for f in found] == [(DEADLINE[6:], DUE, (DUE,))]
    assert early(found) == [] and twice(found) == []


def test_a_timer_decided_before_its_due_time_is_early_by_the_difference() -> None:
    found = firings({"wf-1": [move("t2", "compensating", DEADLINE, DUE - 600_000)]})
    assert early(found) == [
        f"wf-1: timer {DEADLINE[6:]} fired at {DUE - 600_000}, 600000 ms before it was due"
    ]


def test_one_firing_that_moves_a_workflow_twice_is_one_firing() -> None:
    found = firings(
        {"wf-1": [move("t2", "compensating", DEADLINE, DUE), move("t3", "failed", DEADLINE, DUE)]}
    )
    assert len(found) == 1 and twice(found) == []


def test_a_firing_republished_after_a_crash_is_not_a_second_firing() -> None:
    again = move("t2", "compensating", DEADLINE, DUE)
    found = firings({"wf-1": [again, move("t3", "compensated", "ev-2", DUE), again]})
    assert twice(found) == []


def test_the_same_timer_firing_again_later_is_caught() -> None:
    found = firings(
        {
            "wf-1": [
                move("t2", "compensating", DEADLINE, DUE),
                move("t3", "compensated", "ev-2", DUE + 5),
                move("t4", "failed", DEADLINE, DUE + 600_000),
            ]
        }
    )
    assert twice(found) == [
        f"wf-1: timer {DEADLINE[6:]} fired 2 time(s) at [{DUE}, {DUE + 600_000}]"
    ]


def test_a_firing_with_two_clock_readings_is_two_firings() -> None:
    found = firings(
        {
            "wf-1": [
                move("t2", "compensating", DEADLINE, DUE),
                move("t3", "failed", DEADLINE, DUE + 1),
            ]
        }
    )
    assert len(twice(found)) == 1


def test_a_timer_transition_the_recorder_kept_without_at_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"transition t2 of timer .* has no 'at'"):
        firings({"wf-1": [move("t2", "compensating", DEADLINE, None)]})


def test_a_timer_cause_that_is_not_a_timer_key_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'not-a-key' is not a timer key"):
        firings({"wf-1": [move("t2", "compensating", "timer:not-a-key", DUE)]})
