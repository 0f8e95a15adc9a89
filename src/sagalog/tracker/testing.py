"""A time-skipping, in-memory tracker: the rules driven the way the faust service drives them.

``VirtualTracker`` does, in memory and with a virtual clock, what the faust layer
does with Kafka and RocksDB, so a test can run a three-day approval in
microseconds and read what was published:

1. pick the flow version (``flow_for``), call ``decide`` with the clock;
2. store the new record, perform the actions in order: publish (collected in
   ``published``; with ``echo`` the workflow-topic events are read back as the real
   tracker reads its own topic), schedule and cancel timers (a ``TimerIndex``), raise
   alerts, park events;
3. after a change, feed the workflow's parked events again, and give freed admission
   slots to queued workflows;
4. ``advance`` moves the clock through every due timer in due order, firing each at
   its own due time.

It is a test tool: it keeps everything in dicts and scans them where the service
must not (it counts active workflows by looking at every record).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from sagalog.contracts.headers import EventHeaders
from sagalog.events import StateTransition
from sagalog.flows.model import Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import WorkflowState
from sagalog.priority import Priority
from sagalog.tracker.actions import (
    TRANSITIONS_TOPIC,
    Alert,
    CancelTimer,
    Decision,
    Outcome,
    Park,
    Publish,
    ScheduleTimer,
)
from sagalog.tracker.admission import Admission, QueuedWorkflow, is_active
from sagalog.tracker.compensation import CompensationRetry
from sagalog.tracker.inputs import Admit, TimerFired, TrackedEvent, TrackerInput
from sagalog.tracker.machine import decide, flow_for
from sagalog.tracker.record import WorkflowRecord
from sagalog.tracker.timers import TimerIndex


class VirtualTracker:
    """The tracker's rules over in-memory state and a virtual clock (ms since epoch)."""

    def __init__(
        self,
        flows: FlowRegistry | Iterable[Flow],
        *,
        secret: bytes,
        now_ms: int = 0,
        echo: bool = True,
        admission: Mapping[str, Admission] | None = None,
        retry: CompensationRetry | None = None,
    ) -> None:
        self.registry = flows if isinstance(flows, FlowRegistry) else FlowRegistry(flows)
        self.secret = secret
        self.now_ms = now_ms
        self.echo = echo
        self.admission = dict(admission or {})
        self.retry = retry or CompensationRetry()
        self.records: dict[str, WorkflowRecord] = {}
        self.timers = TimerIndex()
        self.parked: dict[str, list[TrackedEvent]] = {}
        self.queued: dict[str, QueuedWorkflow] = {}
        self.published: list[Publish] = []
        self.alerts: list[Alert] = []
        self.outcomes: Counter[Outcome] = Counter()
        self.log: list[tuple[TrackerInput, Decision]] = []
        self._ids = itertools.count(1)

    # -- inputs ----------------------------------------------------------------

    def event(
        self,
        event_type: str,
        workflow_id: str,
        *,
        event_id: str | None = None,
        priority: Priority | None = None,
        **payload: Any,
    ) -> TrackedEvent:
        """An event as an agent or the gateway would publish it now (a fresh id unless given)."""
        headers = EventHeaders(
            id=event_id or f"e{next(self._ids)}",
            type=event_type,
            source="test",
            workflow_id=workflow_id,
            time=_utc(self.now_ms),
            priority=priority.name if priority is not None else None,
        )
        return TrackedEvent.from_headers(headers, payload)

    def send(
        self, event_type: str, workflow_id: str, *, event_id: str | None = None, **payload: Any
    ) -> Decision:
        """Build an event with ``event`` and feed it."""
        return self.feed(self.event(event_type, workflow_id, event_id=event_id, **payload))

    def feed(self, event: TrackerInput) -> Decision:
        """Apply one input now, then what it unblocks (parked events, admissions)."""
        record = self.records.get(event.workflow_id)
        event_type = event.event_type if isinstance(event, TrackedEvent) else ""
        flow = flow_for(self.registry, record, event_type, topic=self._topic_of(event_type))
        if flow is None:
            decision = Decision(None, (), Outcome.IGNORED, f"{event_type} starts no flow")
        else:
            decision = decide(
                record,
                event,
                flow=flow,
                now_ms=self.now_ms,
                secret=self.secret,
                admit=self._admits(flow, record, event),
                retry=self.retry,
            )
        self._apply(event, decision)
        return decision

    def advance(self, ms: int) -> list[Decision]:
        """Move the clock ``ms`` forward, firing every timer on the way at its due time."""
        target = self.now_ms + ms
        decisions = []
        while (due := self.timers.next_due_ms()) is not None and due <= target:
            self.now_ms = max(self.now_ms, due)
            for timer in self.timers.pop_due(self.now_ms):
                decisions.append(self.feed(TimerFired(timer)))
        self.now_ms = target
        return decisions

    # -- reading ---------------------------------------------------------------

    def record(self, workflow_id: str) -> WorkflowRecord:
        return self.records[workflow_id]

    def state(self, workflow_id: str) -> WorkflowState:
        return self.records[workflow_id].state

    def events_of(self, event_type: str, *, workflow_id: str | None = None) -> list[Any]:
        """The payloads published of one type (optionally for one workflow), in order."""
        return [
            p.event
            for p in self.published
            if p.event.event_type == event_type
            and (workflow_id is None or p.workflow_id == workflow_id)
        ]

    def transitions(self, workflow_id: str) -> list[tuple[str, str, str | None]]:
        """``(from, to, step)`` of every transition published for ``workflow_id``."""
        return [
            (p.event.from_state, p.event.to_state, p.event.step)
            for p in self.published
            if isinstance(p.event, StateTransition) and p.workflow_id == workflow_id
        ]

    # -- the faust layer's part ------------------------------------------------

    def _apply(self, event: TrackerInput, decision: Decision) -> None:
        self.log.append((event, decision))
        self.outcomes[decision.outcome] += 1
        before = self.records.get(event.workflow_id)
        if decision.record is not None:
            self.records[event.workflow_id] = decision.record
        echoes = []
        for action in decision.actions:
            if isinstance(action, Publish):
                self.published.append(action)
                if self.echo and action.topic != TRANSITIONS_TOPIC:
                    echoes.append(action)
            elif isinstance(action, ScheduleTimer):
                self.timers.add(action.timer)
            elif isinstance(action, CancelTimer):
                self.timers.cancel(action.key)
            elif isinstance(action, Alert):
                self.alerts.append(action)
            elif isinstance(action, Park) and isinstance(event, TrackedEvent):
                self.parked.setdefault(event.workflow_id, []).append(event)
        if decision.record is None:
            return
        self._track_admission(before, decision.record)
        for publish in echoes:
            self.feed(TrackedEvent.from_headers(publish.headers(), publish.event.to_avro()))
        waiting = self.parked.pop(event.workflow_id, [])
        for parked in waiting:
            self.feed(parked)

    def _track_admission(self, before: WorkflowRecord | None, after: WorkflowRecord) -> None:
        if after.state is WorkflowState.QUEUED and after.workflow_id not in self.queued:
            self.queued[after.workflow_id] = QueuedWorkflow.of(
                after.workflow_id, priority=after.priority, queued_at_ms=after.started_at_ms
            )
        elif after.state is not WorkflowState.QUEUED:
            self.queued.pop(after.workflow_id, None)
        freed = before is not None and is_active(before.state) and not is_active(after.state)
        policy = self.admission.get(after.flow)
        if freed and policy is not None:
            waiting = [
                q for q in self.queued.values() if self.records[q.workflow_id].flow == after.flow
            ]
            for queued in policy.to_admit(waiting, active=self._active(after.flow)):
                self.feed(Admit(queued.workflow_id))

    def _admits(self, flow: Flow, record: WorkflowRecord | None, event: TrackerInput) -> bool:
        policy = self.admission.get(flow.name)
        if record is not None or policy is None:
            return True
        waiting = sum(
            1 for q in self.queued.values() if self.records[q.workflow_id].flow == flow.name
        )
        return policy.admits_new(active=self._active(flow.name), queued=waiting)

    def _queued(self, flow: str) -> list[QueuedWorkflow]:
        return [q for q in self.queued.values() if self.records[q.workflow_id].flow == flow]

    def _active(self, flow: str) -> int:
        return sum(1 for r in self.records.values() if r.flow == flow and is_active(r.state))

    def _topic_of(self, event_type: str) -> str:
        for name in self.registry.names():
            latest = self.registry.latest(name)
            if latest.starts_on == event_type:
                return latest.topic
        return ""


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
