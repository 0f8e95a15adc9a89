"""The tracker's rules: ``decide(record, input) -> Decision``, pure and deterministic.

faust only feeds this function: it reads the record from the state table, calls
``decide`` with the flow version the record names and the tracker's clock, stores the
new record, performs the actions and commits. Everything that makes the tracker
correct under at-least-once delivery is here, testable with plain ints for time:

- **Idempotent.** An input applied twice changes nothing the second time: a
  duplicate id is recognized (``recent_event_ids``); an event about an entry the
  workflow already left is stale (a completion of a completed step, a failure of a
  step no longer running, a decision of a gate no longer open); a timer the record no
  longer lists is stale. Staleness is decided from the record's structure, not by
  comparing ``ce_time`` with the tracker's clock: under consumer lag the tracker's
  clock runs ahead of the events it reads, and a time comparison would drop good ones.
- **Never applied illegally.** An event that arrives before its predecessor (it
  completes a later step while an earlier one runs) is parked: ``Park`` tells the
  faust layer to hold it and feed it again after the workflow's next change.
- **One flow version per workflow.** ``decide`` refuses a flow other than the
  version in the record; ``flow_for`` picks the right one from a registry.
- **Every change of state or of current step publishes a ``StateTransition``**
  (from, to, the cause's id, time in the previous state); one input may cause
  several (``pending_approval -> approved -> running``).

Time: ``now_ms`` is the tracker's clock, injected. The record's times and every timer
are on it; a rebuild that wants the original timestamps passes each event's
``ce_time`` as ``now_ms``.
"""

from __future__ import annotations

from sagalog.durations import format_duration
from sagalog.events import GateDecision, StateTransition
from sagalog.flows.model import (
    BUDGET_REFUSED,
    COMPENSATION_COMPLETED,
    COMPENSATION_REQUESTED,
    GATE_DECIDED,
    GATE_OPENED,
    STEP_FAILED,
    STEP_RETRY_REQUESTED,
    WAIT_ENDED,
    WORKFLOW_CANCELLED,
    WORKFLOW_MIGRATED,
    Flow,
    Gate,
    Signal,
    Step,
    Wait,
)
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import WorkflowState
from sagalog.tracker import compensation, forward
from sagalog.tracker._change import Change
from sagalog.tracker.actions import Alert, Decision, Outcome, Park
from sagalog.tracker.compensation import CompensationRetry
from sagalog.tracker.exceptions import TrackerError
from sagalog.tracker.gates import verify_gate_token
from sagalog.tracker.inputs import Admit, TimerFired, TrackedEvent, TrackerInput
from sagalog.tracker.migration import Refused, plan_migration
from sagalog.tracker.record import CompensationCause, WorkflowRecord
from sagalog.tracker.timers import Timer, TimerKind

_TRACKER_PUBLISHES = frozenset(
    {
        GATE_OPENED,
        COMPENSATION_REQUESTED,
        WAIT_ENDED,
        STEP_RETRY_REQUESTED,
        StateTransition.event_type,
    }
)
_FORWARD = frozenset(
    {WorkflowState.RUNNING, WorkflowState.PENDING_APPROVAL, WorkflowState.AWAITING_INPUT}
)
_AT_ENTRY = {
    WorkflowState.RUNNING: "running",
    WorkflowState.PENDING_APPROVAL: "open",
    WorkflowState.AWAITING_INPUT: "waiting",
}
_DEFAULT_RETRY = CompensationRetry()


def decide(
    record: WorkflowRecord | None,
    event: TrackerInput,
    *,
    flow: Flow,
    now_ms: int,
    secret: bytes,
    admit: bool = True,
    retry: CompensationRetry = _DEFAULT_RETRY,
    migrate_to: Flow | None = None,
) -> Decision:
    """What ``event`` does to the workflow ``record`` (None: not tracked yet).

    Args:
        record: the stored record, or None when the workflow id is unknown.
        event: a workflow event, a fired timer, or an admission.
        flow: the flow version the record names (``flow_for`` finds it); for a new
            workflow, the version it starts on.
        now_ms: the tracker's clock, epoch ms.
        secret: the key of gate tokens.
        admit: for a starting event only: whether admission control lets the new
            workflow run now (False: it waits ``queued`` for an ``Admit``).
        retry: how stuck compensations are retried.
        migrate_to: for a ``WorkflowMigrated``, the version it names (None: not loaded).

    Raises:
        TrackerError: when ``flow`` is not the version the record names, or
            ``event`` belongs to another workflow: a bug in the caller, not bad input.
    """
    if record is None:
        return _first(event, flow=flow, now_ms=now_ms, secret=secret, admit=admit)
    if (record.flow, record.flow_version) != (flow.name, flow.version):
        raise TrackerError(
            f"workflow {record.workflow_id} runs under flow '{record.flow}' "
            f"v{record.flow_version}, not {flow.label}; pass the version the record names "
            "(flow_for(registry, record, ...)): a workflow finishes under the version it "
            "started with"
        )
    if event.workflow_id != record.workflow_id:
        raise TrackerError(
            f"input {event.id} is for workflow {event.workflow_id}, not {record.workflow_id}"
        )
    if isinstance(event, TrackedEvent) and record.has_seen(event.event_id):
        return Decision(None, (), Outcome.DUPLICATE, f"event {event.event_id} was applied already")
    if record.is_terminal:
        return _after_end(record, event, flow)
    change = Change(record, flow=flow, now_ms=now_ms, cause_id=event.id, secret=secret)
    if isinstance(event, TimerFired):
        return _on_timer(change, event.timer, retry)
    if isinstance(event, TrackedEvent) and event.event_type == WORKFLOW_MIGRATED:
        return _on_migrated(change, event, migrate_to)
    if isinstance(event, Admit):
        if record.state is not WorkflowState.QUEUED:
            return Decision(None, (), Outcome.STALE, f"workflow is {record.state}, not queued")
        forward.enter(change, flow.entries[0])
        return change.decision()
    return _on_event(change, event, retry)


def _on_migrated(change: Change, event: TrackedEvent, target: Flow | None) -> Decision:
    """Apply a migration the dry run listed, if the workflow is still where it saw it."""
    record, flow, asked = change.record, change.flow, event.payload
    to_version = asked.get("to_version")
    if asked.get("flow") != record.flow or asked.get("from_version") != record.flow_version:
        return _unchanged(
            Outcome.STALE,
            f"the migration is from {asked.get('flow')} v{asked.get('from_version')}; the "
            f"workflow runs under {flow.label}",
        )
    if target is None or target.version != to_version:
        return _refused(
            record, f"{record.flow} v{to_version} is not loaded in this tracker; deploy it first"
        )
    seen = (asked.get("expected_state"), asked.get("expected_current"))
    if seen != (record.state.value, record.current):
        return _refused(
            record,
            f"it moved on since the dry run (then {seen[0]} at {seen[1]!r}, now "
            f"{record.state} at {record.current!r}); run the dry run again",
        )
    mapping = asked.get("mapping") or {}
    planned = plan_migration(record, old=flow, new=target, mapping=mapping)
    if isinstance(planned, Refused):
        return _refused(record, "; ".join(planned.reasons))
    after = planned.record
    change.cancel()
    change.set(
        flow_version=after.flow_version,
        current=after.current,
        completed=after.completed,
        step_of_state=after.step_of_state,
        gate=after.gate,
        waiting=after.waiting,
    )
    for timer in planned.timers:
        change.schedule(timer.kind, timer.ref, timer.due_ms)
    change.flow = target
    return change.decision(
        event_id=event.event_id,
        event_time_ms=event.time_ms,
        reason=f"migrated from {flow.label} to {target.label}",
    )


def _refused(record: WorkflowRecord, why: str) -> Decision:
    message = f"migration of workflow {record.workflow_id} refused: {why}"
    alert = Alert(name="migration_refused", message=message, workflow_id=record.workflow_id)
    return Decision(None, (alert,), Outcome.REJECTED, message)


def flow_for(
    registry: FlowRegistry, record: WorkflowRecord | None, event_type: str, *, topic: str
) -> Flow | None:
    """The flow version to decide with: the record's own, or the latest that ``event_type`` starts.

    None when the workflow is unknown and the event starts no flow on ``topic``
    (``decide`` is then not needed: the event is ignored).

    Raises:
        FlowDefinitionError: when the record's version is no longer loaded.
    """
    if record is not None:
        return registry.get(record.flow, record.flow_version)
    return registry.started_by(event_type, topic=topic)


def _first(event: TrackerInput, *, flow: Flow, now_ms: int, secret: bytes, admit: bool) -> Decision:
    if not isinstance(event, TrackedEvent):
        return Decision(None, (), Outcome.STALE, f"no workflow {event.workflow_id} is tracked")
    if event.event_type != flow.starts_on:
        return Decision(
            None,
            (),
            Outcome.IGNORED,
            f"no workflow {event.workflow_id} is tracked and {event.event_type} does not start "
            f"{flow.label} (it starts on {flow.starts_on})",
        )
    record = WorkflowRecord(
        workflow_id=event.workflow_id,
        flow=flow.name,
        flow_version=flow.version,
        state=WorkflowState.INITIATED,
        priority=event.priority if event.priority is not None else flow.priority,
        keys=correlation_of(flow, event),
        started_at_ms=now_ms,
        entered_current_state_at_ms=now_ms,
    )
    change = Change(record, flow=flow, now_ms=now_ms, cause_id=event.event_id, secret=secret)
    change.schedule(TimerKind.WORKFLOW_DEADLINE, "workflow", now_ms + flow.deadline)
    if admit:
        forward.enter(change, flow.entries[0])
    else:
        change.move(WorkflowState.QUEUED, step=None)
    return change.decision(event_id=event.event_id, event_time_ms=event.time_ms)


def correlation_of(flow: Flow, event: TrackedEvent) -> dict[str, str]:
    """The flow's correlation keys read from its starting event (those it carries)."""
    keys = {}
    for name in flow.correlation_keys:
        value = event.payload.get(name)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            keys[name] = str(value)
    return keys


def _after_end(record: WorkflowRecord, event: TrackerInput, flow: Flow) -> Decision:
    reason = f"workflow {record.workflow_id} is {record.state}: inputs after its end are ignored"
    if not isinstance(event, TrackedEvent):
        return Decision(None, (), Outcome.STALE, reason)
    step = flow.step_for_completion(event.event_type)
    undone = record.compensation.undone if record.compensation else ()
    if (
        record.state is not WorkflowState.COMPLETED
        and step is not None
        and step.undo_action is not None
        and step.name not in record.completed_names
        and step.name not in undone
    ):
        # An effect happened after the workflow was given up: nobody will undo it.
        message = (
            f"workflow {record.workflow_id} ({flow.label}) is {record.state}, but step "
            f"'{step.name}' completed afterwards ({event.event_id}); its '{step.undo_action}' "
            "must be requested by hand"
        )
        alert = Alert(name="effect_after_end", message=message, workflow_id=record.workflow_id)
        return Decision(None, (alert,), Outcome.IGNORED, message)
    return Decision(None, (), Outcome.IGNORED, reason)


def _on_event(change: Change, event: TrackedEvent, retry: CompensationRetry) -> Decision:
    record, flow, kind = change.record, change.flow, event.event_type
    if kind == flow.starts_on:
        return _unchanged(Outcome.REJECTED, f"workflow {record.workflow_id} was already started")
    if kind in _TRACKER_PUBLISHES:
        return _unchanged(Outcome.IGNORED, f"{kind} is published by the tracker itself")
    if kind == WORKFLOW_CANCELLED:
        return _on_cancelled(change, event, retry)
    if kind == GATE_DECIDED:
        return _park_if_queued(change, event) or _on_gate_decided(change, event, retry)
    expected = flow.wait_for_signal(kind, event.webhook_kind)
    if expected is not None:
        return _park_if_queued(change, event) or _on_signal(change, *expected, event)
    undo = _undo_of(flow, event)
    done = flow.step_for_completion(kind)
    failed = flow.step_for_failure(kind, step=event.step)
    if undo is None and done is None and failed is None:
        if kind in (STEP_FAILED, COMPENSATION_COMPLETED):
            return _unchanged(Outcome.REJECTED, _misaddressed(flow, kind, event.step))
        return _unchanged(Outcome.IGNORED, f"{kind} plays no part in {flow.label}")
    if parked := _park_if_queued(change, event):
        return parked
    if record.state is WorkflowState.COMPENSATING:
        if undo is not None:
            return compensation.on_undone(
                change, undo, event_id=event.event_id, event_time_ms=event.time_ms, retry=retry
            )
        if done is not None:
            return compensation.on_late_completion(
                change, done, event_id=event.event_id, event_time_ms=event.time_ms
            )
        return _unchanged(Outcome.STALE, "the workflow is already compensating")
    if undo is not None:
        return _unchanged(
            Outcome.REJECTED, f"no compensation was requested (workflow is {record.state})"
        )
    if done is not None:
        return _on_completed(change, done, event)
    assert failed is not None
    return _on_failed(change, failed, event, retry)


def _on_completed(change: Change, step: Step, event: TrackedEvent) -> Decision:
    record = change.record
    if step.name in record.completed_names:
        return _unchanged(Outcome.STALE, f"step '{step.name}' is already complete")
    if record.state is WorkflowState.RUNNING and record.current == step.name:
        forward.leave(change, step)
        change.complete(step.name, event.event_id)
        forward.enter(change, change.flow.next_after(step.name))
        return change.decision(event_id=event.event_id, event_time_ms=event.time_ms)
    return _park_or_stale(change, step, event, "completes")


def _on_signal(change: Change, wait: Wait, signal: Signal, event: TrackedEvent) -> Decision:
    record = change.record
    if wait.name in record.completed_names:
        return _unchanged(
            Outcome.STALE, f"signal '{signal.name}' arrived after wait '{wait.name}' ended"
        )
    waiting = record.waiting
    if (
        record.state is WorkflowState.AWAITING_INPUT
        and record.current == wait.name
        and waiting is not None
    ):
        first = next((r for r in waiting.received if r.signal == signal.name), None)
        if first is not None:
            return _unchanged(
                Outcome.STALE,
                f"signal '{signal.name}' of wait '{wait.name}' arrived already (event "
                f"{first.event_id}); the first one counts",
            )
        forward.receive(change, wait, signal, event.event_id)
        return change.decision(event_id=event.event_id, event_time_ms=event.time_ms)
    return _park_or_stale(change, wait, event, f"is signal '{signal.name}' of")


def _on_cancelled(change: Change, event: TrackedEvent, retry: CompensationRetry) -> Decision:
    """An operator's cancellation: undo what the workflow did, the running step included
    (it may have taken effect without saying so yet), as for a timeout."""
    record = change.record
    if record.state is WorkflowState.COMPENSATING:
        return _unchanged(Outcome.STALE, "the workflow is already compensating")
    by = str(event.payload.get("requested_by") or "someone")
    why = str(event.payload.get("reason") or "no reason given")
    compensation.start(
        change,
        CompensationCause.CANCELLATION,
        f"cancelled by {by}: {why}",
        include_current=True,
        retry=retry,
    )
    return change.decision(event_id=event.event_id, event_time_ms=event.time_ms)


def _on_failed(
    change: Change, step: Step, event: TrackedEvent, retry: CompensationRetry
) -> Decision:
    record = change.record
    if step.name in record.completed_names:
        return _unchanged(Outcome.STALE, f"step '{step.name}' failed after it completed")
    if record.state is WorkflowState.RUNNING and record.current == step.name:
        if step.budget_gate is not None and event.payload.get("error_class") == BUDGET_REFUSED:
            forward.open_budget_gate(change, step)
            return change.decision(event_id=event.event_id, event_time_ms=event.time_ms)
        reason = str(event.payload.get("reason") or "no reason given")
        compensation.start(
            change,
            CompensationCause.FAILURE,
            f"step '{step.name}' failed: {reason}",
            include_current=False,
            retry=retry,
        )
        return change.decision(event_id=event.event_id, event_time_ms=event.time_ms)
    return _park_or_stale(change, step, event, "fails")


def _on_gate_decided(change: Change, event: TrackedEvent, retry: CompensationRetry) -> Decision:
    record, flow, verdict = change.record, change.flow, event.gate
    if verdict is None:
        return _unchanged(Outcome.REJECTED, "GateDecided without its payload")
    if not isinstance(flow.entry(verdict.gate), Gate):
        return _unchanged(Outcome.REJECTED, f"GateDecided names gate '{verdict.gate}', not in flow")
    opened = record.gate if record.gate is not None and record.gate.gate == verdict.gate else None
    attempts = opened.attempt if opened is not None else 1

    def signed(attempt: int) -> bool:
        return verify_gate_token(
            change.secret,
            verdict.token,
            workflow_id=record.workflow_id,
            gate=verdict.gate,
            attempt=attempt,
        )

    valid = [a for a in range(attempts, 0, -1) if signed(a)]
    if not valid:
        return _unchanged(Outcome.REJECTED, f"forged token for gate '{verdict.gate}'")
    if record.state is not WorkflowState.PENDING_APPROVAL or opened is None:
        return _unchanged(
            Outcome.REJECTED,
            f"expired token: gate '{verdict.gate}' is not open (workflow is {record.state})",
        )
    if valid[0] != opened.attempt:
        return _unchanged(
            Outcome.REJECTED,
            f"expired token: it is for attempt {valid[0]} of gate '{verdict.gate}', now at "
            f"attempt {opened.attempt}",
        )
    gate = flow.entry(verdict.gate)
    assert isinstance(gate, Gate)
    if verdict.decision is GateDecision.APPROVED:
        forward.approve(change, gate, event.event_id, verdict.decided_by or "someone")
    else:
        forward.leave(change, gate)
        comment = f": {verdict.comment}" if verdict.comment else ""
        by = verdict.decided_by or "someone"
        compensation.start(
            change,
            CompensationCause.REJECTION,
            f"gate '{gate.name}' rejected by {by}{comment}",
            include_current=False,
            retry=retry,
        )
    return change.decision(event_id=event.event_id, event_time_ms=event.time_ms)


def _on_timer(change: Change, timer: Timer, retry: CompensationRetry) -> Decision:
    record = change.record
    if timer.due_ms > change.now_ms:
        return _unchanged(Outcome.REJECTED, f"timer {timer.key} is not due until {timer.due_ms}")
    if timer not in record.timers:
        return _unchanged(Outcome.STALE, f"timer {timer.key} is no longer expected")
    change.drop(timer)
    kind, flow = timer.kind, change.flow
    if kind is TimerKind.COMPENSATION_TIMEOUT:
        return compensation.on_timeout(change, retry)
    if kind is TimerKind.GATE_ESCALATION:
        forward.escalate(change, int(timer.ref.rsplit("#", 1)[1]))
        return change.decision()
    if kind is TimerKind.GATE_DEADLINE:
        forward.apply_gate_default(change, retry)
        return change.decision()
    if kind is TimerKind.WAIT_TIMEOUT:
        forward.apply_wait_default(change, retry)
        return change.decision()
    where = f" at '{record.current}'" if record.current else f" ({record.state})"
    if kind is TimerKind.WORKFLOW_DEADLINE:
        cause = CompensationCause.DEADLINE
        reason = f"the workflow deadline ({format_duration(flow.deadline)}) passed{where}"
    elif kind is TimerKind.STEP_TIMEOUT:
        cause = CompensationCause.TIMEOUT
        entry = flow.entry(timer.ref)
        limit = format_duration(entry.timeout) if isinstance(entry, Step) else "?"
        reason = f"step '{timer.ref}' did not complete within {limit}"
    else:  # SEGMENT_TIMEOUT
        cause = CompensationCause.TIMEOUT
        segment = next((s for s in flow.segments if s.name == timer.ref), None)
        limit = format_duration(segment.timeout) if segment is not None else "?"
        reason = f"segment '{timer.ref}' did not complete within {limit}{where}"
    compensation.start(change, cause, reason, include_current=True, retry=retry)
    return change.decision()


def _undo_of(flow: Flow, event: TrackedEvent) -> Step | None:
    """The step whose compensation or follow-up ``event`` completes, if any."""
    if event.event_type == COMPENSATION_COMPLETED:
        entry = flow.entry(event.step or "")
        return (
            entry
            if isinstance(entry, Step) and COMPENSATION_COMPLETED in entry.undo_completes_on
            else None
        )
    return next((s for s in flow.steps if event.event_type in s.undo_completes_on), None)


def _park_if_queued(change: Change, event: TrackedEvent) -> Decision | None:
    if change.record.state is not WorkflowState.QUEUED:
        return None
    reason = "the workflow is queued for admission; held until it runs"
    return _unchanged(Outcome.PARKED, reason, Park(event.event_id, reason))


def _park_or_stale(change: Change, entry: Step | Wait, event: TrackedEvent, verb: str) -> Decision:
    record, flow = change.record, change.flow
    current = record.current
    if (
        record.state in _FORWARD
        and current is not None
        and flow.index(entry.name) > flow.index(current)
    ):
        reason = (
            f"{event.event_type} {verb} {entry.kind} '{entry.name}' while '{current}' is "
            f"still {_AT_ENTRY[record.state]}; held until its predecessor completes"
        )
        return _unchanged(Outcome.PARKED, reason, Park(event.event_id, reason))
    return _unchanged(
        Outcome.STALE,
        f"{event.event_type} {verb} {entry.kind} '{entry.name}', which the workflow has left "
        f"({record.state}{f' at {current!r}' if current else ''})",
    )


def _misaddressed(flow: Flow, kind: str, step: str | None) -> str:
    entry = flow.entry(step or "")
    if entry is None:
        return f"{kind} names step {step!r}, which {flow.label} lacks"
    if kind == STEP_FAILED:
        return f"{kind} names '{step}', a {entry.kind} that does not fail on it"
    ends = entry.undo_completes_on if isinstance(entry, Step) else ()
    if not ends:
        return f"{kind} names '{step}', a {entry.kind} with nothing to undo"
    return f"{kind} names step '{step}', whose undo completes on {', '.join(ends)} instead"


def _unchanged(outcome: Outcome, reason: str, *actions: Park) -> Decision:
    return Decision(None, actions, outcome, reason)
