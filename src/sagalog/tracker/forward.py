"""The forward path of a workflow: start a step, open, escalate and close a gate, complete.

Every entry of a flow is entered the same way, whether the previous one completed,
a gate was approved (by a person or by its deadline's default) or a queued workflow
was admitted: ``enter`` schedules the entry's timers (and those of the segments it
starts) and publishes what the entry needs, and ``leave`` cancels them again.
"""

from __future__ import annotations

from sagalog.durations import format_duration
from sagalog.events import GateDecided, GateDecision, GateOpened, StepRetryRequested, WaitEnded
from sagalog.flows.model import Gate, Signal, Step, Wait
from sagalog.flows.states import WorkflowState
from sagalog.tracker import compensation
from sagalog.tracker._change import Change, at
from sagalog.tracker.actions import TRACKER_SOURCE
from sagalog.tracker.compensation import CompensationRetry
from sagalog.tracker.gates import gate_token
from sagalog.tracker.record import (
    CompensationCause,
    GateProgress,
    SignalReceived,
    WaitProgress,
)
from sagalog.tracker.timers import Timer, TimerKind

DEADLINE_DECIDER = f"{TRACKER_SOURCE} (gate deadline)"
"""``decided_by`` of a ``GateDecided`` the tracker publishes when it applies a gate's default."""


def enter(change: Change, entry: Step | Gate | Wait | None) -> None:
    """Move on to ``entry``: start a step, open a gate or a wait, or (None) complete."""
    now = change.now_ms
    if entry is None:
        last = change.record.current
        change.cancel()
        change.move(
            WorkflowState.COMPLETED, step=None, current=None, terminal_reason=f"'{last}' completed"
        )
        return
    for segment in change.flow.segments:
        if segment.steps[0] == entry.name:
            change.schedule(TimerKind.SEGMENT_TIMEOUT, segment.name, now + segment.timeout)
    if isinstance(entry, Step):
        change.move(WorkflowState.RUNNING, step=entry.name, current=entry.name)
        change.schedule(TimerKind.STEP_TIMEOUT, entry.name, now + entry.timeout)
        return
    if isinstance(entry, Wait):
        waiting = WaitProgress(wait=entry.name, opened_at_ms=now, deadline_ms=now + entry.timeout)
        change.move(
            WorkflowState.AWAITING_INPUT, step=entry.name, current=entry.name, waiting=waiting
        )
        change.schedule(TimerKind.WAIT_TIMEOUT, entry.name, waiting.deadline_ms)
        return
    _open(change, entry, attempt=1)


def _open(change: Change, gate: Gate, *, attempt: int) -> None:
    """Open ``gate`` (its ``attempt``-th opening): the token, the announcement, its timers."""
    now = change.now_ms
    progress = GateProgress(
        gate=gate.name,
        attempt=attempt,
        assignee=gate.assignee,
        token=gate_token(change.secret, change.workflow_id, gate.name, attempt),
        opened_at_ms=now,
        deadline_ms=now + gate.deadline,
    )
    change.move(WorkflowState.PENDING_APPROVAL, step=gate.name, current=gate.name, gate=progress)
    _announce(change, progress)
    if gate.escalation:
        ref = f"{gate.name}#{attempt}#1"
        change.schedule(TimerKind.GATE_ESCALATION, ref, now + gate.escalation[0].after)
    change.schedule(TimerKind.GATE_DEADLINE, f"{gate.name}#{attempt}", progress.deadline_ms)


def open_budget_gate(change: Change, step: Step) -> None:
    """``step`` ran out of budget and its flow says gate: hold it for a person.

    The step's timeout stops while the gate is open (the person's time is not the
    step's); its segments' and the workflow's deadlines go on. Each opening is a new
    attempt, so a token of an earlier opening no longer decides it.
    """
    gate = step.budget_gate
    assert gate is not None
    change.cancel(lambda t: t.kind is TimerKind.STEP_TIMEOUT and t.ref == step.name)
    openings = sum(1 for done in change.record.completed if done.name == gate.name)
    _open(change, gate, attempt=openings + 1)


def leave(change: Change, entry: Step | Gate | Wait) -> None:
    """Cancel the timers of ``entry`` and of the segments it ends."""
    ending = {s.name for s in change.flow.segments if s.steps[-1] == entry.name}
    gate_prefix = f"{entry.name}#"

    def belongs(timer: Timer) -> bool:
        if timer.kind in (TimerKind.STEP_TIMEOUT, TimerKind.WAIT_TIMEOUT):
            return timer.ref == entry.name
        if timer.kind in (TimerKind.GATE_ESCALATION, TimerKind.GATE_DEADLINE):
            return timer.ref.startswith(gate_prefix)
        return timer.kind is TimerKind.SEGMENT_TIMEOUT and timer.ref in ending

    change.cancel(belongs)


def _announce(change: Change, progress: GateProgress) -> None:
    change.publish(
        GateOpened(
            gate=progress.gate,
            assignee=progress.assignee,
            token=progress.token,
            attempt=progress.attempt,
            deadline=at(progress.deadline_ms),
            escalation_level=progress.escalation_level,
        )
    )


def escalate(change: Change, level: int) -> None:
    """Hand the open gate to the next person in its chain (same attempt, same token)."""
    progress = change.record.gate
    assert progress is not None
    gate = change.flow.entry(progress.gate)
    assert isinstance(gate, Gate)
    escalation = gate.escalation[level - 1]
    progress = progress.model_copy(update={"escalation_level": level, "assignee": escalation.to})
    change.set(gate=progress)
    _announce(change, progress)
    if level < len(gate.escalation):
        due = progress.opened_at_ms + gate.escalation[level].after
        change.schedule(
            TimerKind.GATE_ESCALATION, f"{gate.name}#{progress.attempt}#{level + 1}", due
        )


def apply_gate_default(change: Change, retry: CompensationRetry) -> None:
    """The gate's deadline passed undecided: approve, reject or fail as the flow says.

    Approve and reject publish the ``GateDecided`` a person would have (the next
    step's agent starts on it); its id is remembered, so reading it back is a duplicate.
    """
    progress = change.record.gate
    assert progress is not None
    gate = change.flow.entry(progress.gate)
    assert isinstance(gate, Gate)
    waited = format_duration(gate.deadline)
    if gate.default != "fail":
        decision = GateDecision.APPROVED if gate.default == "approve" else GateDecision.REJECTED
        decided = GateDecided(
            gate=gate.name,
            token=progress.token,
            decision=decision,
            decided_by=DEADLINE_DECIDER,
            comment=f"not decided within {waited}; the gate's default is {gate.default}",
        )
        event_id = change.publish(decided, remember=True)
        if decision is GateDecision.APPROVED:
            approve(change, gate, event_id, DEADLINE_DECIDER)
            return
    leave(change, gate)
    cause = CompensationCause.REJECTION if gate.default == "reject" else CompensationCause.FAILURE
    reason = f"gate '{gate.name}' was not decided within {waited}: default {gate.default}"
    compensation.start(change, cause, reason, include_current=False, retry=retry)


def approve(change: Change, gate: Gate, event_id: str, decided_by: str) -> None:
    """Continue after an approved gate: with the next entry, or, for a step's budget
    gate, with that step again, run over its budget (``StepRetryRequested``)."""
    attempt = change.record.gate.attempt if change.record.gate is not None else 1
    leave(change, gate)
    change.complete(gate.name, event_id)
    change.move(WorkflowState.APPROVED, step=gate.name)
    step = change.flow.step_of_budget_gate(gate.name)
    if step is None:
        enter(change, change.flow.next_after(gate.name))
        return
    change.move(WorkflowState.RUNNING, step=step.name, current=step.name)
    change.schedule(TimerKind.STEP_TIMEOUT, step.name, change.now_ms + step.timeout)
    change.publish(
        StepRetryRequested(
            step=step.name,
            gate=gate.name,
            decided_by=decided_by,
            over_budget=True,
            attempt=attempt,
        )
    )


def receive(change: Change, wait: Wait, signal: Signal, event_id: str) -> None:
    """Note a signal of the open wait; end the wait when that was the last it needed."""
    waiting = change.record.waiting
    assert waiting is not None and waiting.wait == wait.name
    arrived = SignalReceived(signal=signal.name, event_id=event_id, at_ms=change.now_ms)
    waiting = waiting.model_copy(update={"received": (*waiting.received, arrived)})
    change.set(waiting=waiting)
    if wait.is_satisfied(waiting.received_names):
        _end_wait(change, wait, waiting, timed_out=False)


def apply_wait_default(change: Change, retry: CompensationRetry) -> None:
    """The wait's timeout passed before its signals: continue with what came, or fail."""
    waiting = change.record.waiting
    assert waiting is not None
    wait = change.flow.entry(waiting.wait)
    assert isinstance(wait, Wait)
    if wait.default == "continue":
        _end_wait(change, wait, waiting, timed_out=True)
        return
    leave(change, wait)
    missing = [s.name for s in wait.signals if s.name not in waiting.received_names]
    reason = (
        f"wait '{wait.name}' timed out after {format_duration(wait.timeout)} without "
        f"{', '.join(repr(m) for m in missing)}: default fail"
    )
    compensation.start(
        change, CompensationCause.TIMEOUT, reason, include_current=False, retry=retry
    )


def _end_wait(change: Change, wait: Wait, waiting: WaitProgress, *, timed_out: bool) -> None:
    """Publish ``WaitEnded`` (the next entry's start) and move on to that entry."""
    received = waiting.received_names
    ended = WaitEnded(
        wait=wait.name,
        received=list(received),
        missing=[s.name for s in wait.signals if s.name not in received],
        timed_out=timed_out,
        signal_event_ids=[r.event_id for r in waiting.received],
    )
    event_id = change.publish(ended)
    leave(change, wait)
    change.complete(wait.name, event_id)
    enter(change, change.flow.next_after(wait.name))
