"""Timers judged from the transitions topic: none fired early, none fired twice. Pure.

A transition a timer caused names it: its ``cause_event_id`` is ``timer:<key>``
(``sagalog.tracker.inputs.TimerFired.id``), and the key starts with the due time on
the tracker's clock (``sagalog.tracker.timers``). Its ``at`` is the tracker's clock
when the timer fired. So the log alone says, for every firing, when it was due and
when it fired, without trusting the tracker's own account:

- **early**: ``at`` before the due time. On a virtual clock this is how a wall clock
  leaking into a timer decision shows; on a wall clock, a clock that went back and
  fired on a time it had already left.
- **twice**: one timer causing transitions in two firings: two ``at`` values, or
  two runs of transitions with another cause between them. One firing may move a
  workflow more than once (a gate's default reject moves it to ``compensating``
  and on), always at one ``at`` and in one run; a crashed tracker republishes a
  firing with the same event ids, which ``checker.dedupe`` drops first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sagalog.tracker.timers import decode_timer

from .checker import Transition, dedupe

TIMER_CAUSE = "timer:"
"""How ``TimerFired.id`` starts."""


@dataclass(frozen=True)
class Firing:
    """One run of transitions one timer caused, in one workflow."""

    workflow_id: str
    timer_key: str
    due_ms: int
    at_ms: tuple[int, ...]
    """The ``at`` of each transition of the run (one value when the firing was one)."""


def firings(transitions: Mapping[str, Sequence[Transition]]) -> list[Firing]:
    """Every run of consecutive transitions caused by the same timer, per workflow.

    Raises:
        ValueError: a ``timer:`` cause that is not a timer key, or a timer's transition
            without ``at`` (the recorder must keep both), naming the transition.
    """
    found = []
    for workflow_id, moves in transitions.items():
        run: list[Transition] = []
        for move in [*dedupe(moves), None]:
            cause = move.cause_event_id if move is not None else None
            if run and cause != run[0].cause_event_id:
                found.append(_firing(workflow_id, run))
                run = []
            if move is not None and cause is not None and cause.startswith(TIMER_CAUSE):
                run.append(move)
    return found


def _firing(workflow_id: str, run: list[Transition]) -> Firing:
    key = str(run[0].cause_event_id)[len(TIMER_CAUSE) :]
    missing = [t.event_id for t in run if t.at_ms is None]
    if missing:
        raise ValueError(f"{workflow_id}: transition {missing[0]} of timer {key} has no 'at'")
    due_ms = decode_timer(key).due_ms
    return Firing(workflow_id, key, due_ms, tuple(sorted({int(t.at_ms or 0) for t in run})))


def early(found: Sequence[Firing]) -> list[str]:
    """Each firing before its due time, as ``workflow: key fired at … (… ms early)``."""
    return [
        f"{f.workflow_id}: timer {f.timer_key} fired at {f.at_ms[0]}, "
        f"{f.due_ms - f.at_ms[0]} ms before it was due"
        for f in found
        if f.at_ms[0] < f.due_ms
    ]


def twice(found: Sequence[Firing]) -> list[str]:
    """Each timer that fired more than once in its workflow, with the times it fired."""
    by_timer: dict[tuple[str, str], list[int]] = {}
    for f in found:
        by_timer.setdefault((f.workflow_id, f.timer_key), []).extend(f.at_ms)
    runs: dict[tuple[str, str], int] = {}
    for f in found:
        runs[(f.workflow_id, f.timer_key)] = runs.get((f.workflow_id, f.timer_key), 0) + 1
    return [
        f"{workflow_id}: timer {key} fired {runs[(workflow_id, key)]} time(s) at "
        f"{sorted(set(times))}"
        for (workflow_id, key), times in by_timer.items()
        if runs[(workflow_id, key)] > 1 or len(set(times)) > 1
    ]
