"""What ``decide`` asks for, as data: events to publish, timers to set and cancel, alerts.

The rules never produce, sleep or log. They return a ``Decision``: the new record
(or None when nothing changed) and the actions, in the order to perform them. The
faust layer stores the record, performs the actions and commits; performing an
action twice is harmless, because every published event has a deterministic id
(the same input applied to the same record yields the same ids, so consumers
deduplicate a redelivered publish) and timers are keyed.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from sagalog.contracts.headers import (
    CONTENT_TYPE,
    H_CAUSATION_ID,
    H_CHAIN,
    H_CONTENT_TYPE,
    H_CORRELATION_ID,
    H_FLOW_VERSION,
    H_ID,
    H_PRIORITY,
    H_SOURCE,
    H_SPECVERSION,
    H_TIME,
    H_TRACEPARENT,
    H_TYPE,
    H_WORKFLOW_ID,
    SPEC_VERSION,
    EventHeaders,
)
from sagalog.contracts.models import Event
from sagalog.priority import Priority
from sagalog.tracker.record import WorkflowRecord
from sagalog.tracker.timers import Timer

KafkaHeaders = list[tuple[str, str | bytes | None]]

TRACKER_SOURCE = "sagalog/saga-tracker"
"""``ce_source`` of everything the tracker publishes."""

TRANSITIONS_TOPIC = "sagalog.transitions"
"""Where ``StateTransition`` events go (declared in ``topology/topics.yaml``)."""


@dataclass(frozen=True, slots=True)
class Publish:
    """Publish ``event`` on ``topic``, keyed by the workflow id.

    Attributes:
        event: the payload, a sagalog ``Event`` instance.
        event_id: its ``ce_id``, deterministic (see the module docstring).
        causation_id: the id of the input that caused it.
        topic: the workflow topic, or ``TRANSITIONS_TOPIC`` for a ``StateTransition``.
        workflow_id: the Kafka key.
        flow_version: for the ``ce_flowversion`` header.
        priority: for the ``ce_priority`` header.
        time_ms: for ``ce_time``: the tracker's clock when it decided.
        chain: for the ``sagalog_chain`` header: the workflow's chain head once its
            cause was sealed. The processor stamps it (``stamped``) when it performs
            the action; the rules leave it None (sealing is not theirs, see
            ``sagalog.tracker.seal``).
        traceparent: the trace context it continues (the input's, or the workflow's
            last), stamped by the processor like ``chain``; the service may put its
            own span in between (``sagalog.tracing``).
    """

    event: Event
    event_id: str
    causation_id: str
    topic: str
    workflow_id: str
    flow_version: int
    priority: Priority
    time_ms: int
    chain: str | None = None
    traceparent: str | None = None

    def stamped(self, *, chain: str | None, traceparent: str | None) -> Publish:
        """This action stamped with the workflow's chain head and trace context."""
        # The constructor, not ``dataclasses.replace``: the tracker stamps every event
        # it publishes, and ``replace`` costs several times more.
        return Publish(
            self.event,
            self.event_id,
            self.causation_id,
            self.topic,
            self.workflow_id,
            self.flow_version,
            self.priority,
            self.time_ms,
            chain,
            traceparent,
        )

    def headers(self, *, source: str = TRACKER_SOURCE) -> EventHeaders:
        """The CloudEvents headers to send it with."""
        return EventHeaders(
            id=self.event_id,
            type=self.event.event_type,
            source=source,
            workflow_id=self.workflow_id,
            time=dt.datetime.fromtimestamp(self.time_ms / 1000, dt.UTC),
            causation_id=self.causation_id,
            flow_version=self.flow_version,
            priority=self.priority.name,
            chain=self.chain,
            traceparent=self.traceparent,
        )

    def kafka_headers(self, *, source: str = TRACKER_SOURCE) -> KafkaHeaders:
        """``headers(source=source).to_kafka()``, without the ``EventHeaders`` in between:
        the tracker renders the headers of every event it publishes."""
        stamp = dt.datetime.fromtimestamp(self.time_ms / 1000, dt.UTC)
        pairs: KafkaHeaders = [
            (H_SPECVERSION, SPEC_VERSION),
            (H_ID, self.event_id),
            (H_SOURCE, source),
            (H_TYPE, self.event.event_type),
            (H_TIME, stamp.isoformat().replace("+00:00", "Z")),
            (H_CONTENT_TYPE, CONTENT_TYPE),
            (H_WORKFLOW_ID, self.workflow_id),
            (H_CAUSATION_ID, self.causation_id),
            (H_CORRELATION_ID, self.workflow_id),
            (H_FLOW_VERSION, str(self.flow_version)),
            (H_PRIORITY, self.priority.name),
        ]
        if self.traceparent is not None:
            pairs.append((H_TRACEPARENT, self.traceparent))
        if self.chain is not None:
            pairs.append((H_CHAIN, self.chain))
        return pairs


@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    """Put ``timer`` in the timer table (under ``timer.key``)."""

    timer: Timer


@dataclass(frozen=True, slots=True)
class CancelTimer:
    """Delete the timer with ``key`` from the timer table (absent is fine)."""

    key: str


@dataclass(frozen=True, slots=True)
class Alert:
    """Tell an operator: publish an alert event and log it (``name`` is the alert's id)."""

    name: str
    message: str
    workflow_id: str


@dataclass(frozen=True, slots=True)
class Park:
    """Hold the input back and feed it again after the workflow's next change.

    An event that arrives before its predecessor (a step's completion while an
    earlier step still runs), or any event of a workflow still queued for admission.
    """

    event_id: str
    reason: str


Action = Publish | ScheduleTimer | CancelTimer | Alert | Park


class Outcome(enum.StrEnum):
    """What became of an input; the label of the tracker's per-outcome counter."""

    APPLIED = "applied"
    """The record changed."""
    DUPLICATE = "duplicate"
    """Its id was applied before."""
    STALE = "stale"
    """It concerns a state the workflow has left (a step already complete, a timer cancelled)."""
    PARKED = "parked"
    """It came before its predecessor; held back (``Park``)."""
    IGNORED = "ignored"
    """Not the tracker's business: an unknown workflow, an unknown type, a terminal workflow."""
    REJECTED = "rejected"
    """Invalid: a forged or expired gate token, an event that can never apply here."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer of ``decide``.

    Attributes:
        record: the new record; None when the record is unchanged.
        actions: what to do, in order.
        outcome: what became of the input.
        reason: why nothing changed (or what is noteworthy), for the structured warning.
    """

    record: WorkflowRecord | None
    actions: tuple[Action, ...] = ()
    outcome: Outcome = Outcome.APPLIED
    reason: str | None = None

    @property
    def changed(self) -> bool:
        return self.record is not None

    def published(self) -> tuple[Event, ...]:
        """The events to publish, in order (a convenience for tests and logs)."""
        return tuple(a.event for a in self.actions if isinstance(a, Publish))
