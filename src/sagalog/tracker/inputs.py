"""What ``decide`` is fed: an event from a workflow topic, a timer that fired, an admission.

The faust layer decodes a record's headers (and, for the few platform events whose
payload matters, its payload) into a ``TrackedEvent``; the rules never see Kafka.
Every input has an ``id``: the ``ce_id`` of an event, or a deterministic id for the
tracker's own inputs, so a ``StateTransition`` always names its cause and a replay
names the same one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagalog.contracts.headers import EventHeaders
from sagalog.events import GateDecision
from sagalog.flows.model import (
    COMPENSATION_COMPLETED,
    GATE_DECIDED,
    STEP_FAILED,
    WEBHOOK_RECEIVED,
)
from sagalog.priority import Priority
from sagalog.tracker.timers import Timer


class GateVerdict(BaseModel):
    """The part of a ``GateDecided`` payload the rules read."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    gate: str
    token: str
    decision: GateDecision
    decided_by: str = ""
    comment: str | None = None


class TrackedEvent(BaseModel):
    """One event of a workflow topic, as the rules see it.

    Attributes:
        event_id: ``ce_id``, the idempotency key.
        event_type: ``ce_type``, e.g. ``procurement.v1.BudgetReserved``.
        workflow_id: the Kafka key / ``ce_workflowid``.
        time_ms: ``ce_time`` in epoch ms (kept as the workflow's last event time).
        payload: the decoded payload, when it was decoded (only platform events need it).
        causation_id: ``ce_causationid``.
        step: the ``step`` of a ``StepFailed`` or ``CompensationCompleted`` payload.
        gate: the decision of a ``GateDecided`` payload.
        priority: ``ce_priority`` of a starting event; the flow's priority when absent.
        webhook_kind: the ``kind`` of a ``WebhookReceived`` payload.
        traceparent: the W3C trace context of the span that produced it, so what the
            tracker publishes in answer continues the workflow's trace.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: str = Field(min_length=1)
    event_type: str
    workflow_id: str = Field(min_length=1)
    time_ms: int
    payload: dict[str, Any] = Field(default_factory=dict)
    causation_id: str | None = None
    step: str | None = None
    gate: GateVerdict | None = None
    priority: Priority | None = None
    webhook_kind: str | None = None
    traceparent: str | None = None

    @property
    def id(self) -> str:
        return self.event_id

    @classmethod
    def from_headers(
        cls, headers: EventHeaders, payload: Mapping[str, Any] | None = None
    ) -> TrackedEvent:
        """Build from a consumed record's metadata and (optionally) decoded payload.

        The step of a ``StepFailed``/``CompensationCompleted`` and the verdict of a
        ``GateDecided`` are lifted out of the payload, so the rules read fields, not dicts.
        """
        body = dict(payload or {})
        step = body.get("step") if headers.type in (STEP_FAILED, COMPENSATION_COMPLETED) else None
        gate = _verdict(body) if headers.type == GATE_DECIDED else None
        webhook = body.get("kind") if headers.type == WEBHOOK_RECEIVED else None
        return cls(
            event_id=headers.id,
            event_type=headers.type,
            workflow_id=headers.workflow_id,
            time_ms=int(headers.time.timestamp() * 1000),
            payload=body,
            causation_id=headers.causation_id,
            step=step if isinstance(step, str) else None,
            gate=gate,
            priority=Priority.parse(headers.priority) if headers.priority else None,
            webhook_kind=webhook if isinstance(webhook, str) else None,
            traceparent=headers.traceparent,
        )


def _verdict(payload: Mapping[str, Any]) -> GateVerdict | None:
    """A malformed decision reads as none: ``decide`` rejects it with a reason, never crashes."""
    try:
        return GateVerdict.model_validate(payload)
    except ValidationError:
        return None


@dataclass(frozen=True, slots=True)
class TimerFired:
    """A due timer taken from the timer table by a tick."""

    timer: Timer

    @property
    def id(self) -> str:
        """Deterministic, so a transition it causes names the same cause on every replay."""
        return f"timer:{self.timer.key}"

    @property
    def workflow_id(self) -> str:
        return self.timer.workflow_id


@dataclass(frozen=True, slots=True)
class Admit:
    """A queued workflow takes a slot that freed up (see ``sagalog.tracker.admission``)."""

    workflow_id: str

    @property
    def id(self) -> str:
        return f"admit:{self.workflow_id}"


TrackerInput = TrackedEvent | TimerFired | Admit
"""Anything ``decide`` accepts."""
