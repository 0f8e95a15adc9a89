"""The JSON shapes the API takes and returns (and so its OpenAPI document).

Request bodies are strict pydantic models, so a bad field is refused with a 422 that
names it. Responses are built from the tracker's stored records by plain functions.
Times are ISO 8601 in UTC.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sagalog.contracts.headers import trace_id_of
from sagalog.services.gateway.decisions import Decision
from sagalog.services.gateway.read_model import TransitionEntry
from sagalog.tracker.record import WorkflowRecord


def utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


class ErrorBody(BaseModel):
    """Every error the gateway answers: a message to act on, and data to match on."""

    error: str
    detail: Any = None


class DecisionRequest(BaseModel):
    """A person's answer at a gate."""

    model_config = ConfigDict(extra="forbid")

    token: str = Field(
        min_length=1, max_length=200, description="From GateOpened or GET /v1/gates."
    )
    workflow_id: str = Field(min_length=1, max_length=256)
    decision: Decision
    decided_by: str = Field(min_length=1, max_length=200, description="Who decides (an email).")
    comment: str | None = Field(default=None, max_length=2000)


class CancelRequest(BaseModel):
    """An operator's cancellation of a running workflow."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=2000, description="Why; kept in the audit.")
    requested_by: str = Field(min_length=1, max_length=200, description="Who asks (an email).")


class Accepted(BaseModel):
    """An event the gateway published (or had published already, for a repeat)."""

    event_id: str
    event_type: str
    workflow_id: str
    topic: str
    partition: int
    offset: int
    duplicate: bool = Field(
        default=False, description="True when this repeats an accepted request: nothing new."
    )


class DecisionAccepted(Accepted):
    gate: str
    decision: Decision
    decided_by: str


class GateView(BaseModel):
    """A gate awaiting a person."""

    workflow_id: str
    flow: str
    flow_version: int
    gate: str
    attempt: int
    assignee: str
    escalation_level: int
    opened_at: dt.datetime
    deadline: dt.datetime
    token: str


class TimerView(BaseModel):
    kind: str
    ref: str
    due: dt.datetime


class TransitionView(BaseModel):
    event_id: str
    from_state: str
    to_state: str
    step: str | None
    at: dt.datetime
    time_in_previous_state_ms: int
    cause_event_id: str
    partition: int | None = Field(
        default=None, description="Where it lies in the transitions topic."
    )
    offset: int | None = None


class SealedEventView(BaseModel):
    """An event the tracker read for the workflow: its position and content hash."""

    topic: str
    partition: int
    offset: int
    event_id: str
    hash: str


class SealView(BaseModel):
    """What the tracker sealed of the workflow's log (``sagalog audit`` reads it)."""

    chain: str | None = Field(description="The head of the workflow's hash chain.")
    chain_base: str | None = Field(description="The chain value before the first listed event.")
    dropped: int = Field(description="Older sealed events no longer listed.")
    events: list[SealedEventView]


class WorkflowSummary(BaseModel):
    workflow_id: str
    flow: str
    flow_version: int
    state: str
    current: str | None
    priority: str
    started_at: dt.datetime
    entered_state_at: dt.datetime
    terminal_reason: str | None


class CompensationView(BaseModel):
    cause: str
    reason: str
    in_flight: str | None
    remaining: list[str]
    undone: list[str]


class SignalView(BaseModel):
    signal: str
    event_id: str
    at: dt.datetime


class WaitView(BaseModel):
    """The wait for outside events the workflow is at: what came so far, and when it ends."""

    wait: str
    opened_at: dt.datetime
    deadline: dt.datetime
    received: list[SignalView]


class WorkflowDetail(WorkflowSummary):
    completed: list[str]
    keys: dict[str, str] = Field(
        default_factory=dict, description="Its correlation keys (webhooks may name it by one)."
    )
    open_gate: GateView | None
    open_wait: WaitView | None = None
    pending_timers: list[TimerView]
    compensation: CompensationView | None
    history: list[TransitionView]
    seal: SealView | None = None
    trace_id: str | None = Field(
        default=None,
        description="The workflow's trace id (W3C), to find its spans in a tracing backend.",
    )


class WorkflowList(BaseModel):
    workflows: list[WorkflowSummary]
    next_after: str | None = Field(
        description="Pass as ?after= for the next page; null on the last page."
    )


class GateList(BaseModel):
    gates: list[GateView]


class Health(BaseModel):
    """``ready``: reads are served. ``status``: ``starting`` (not caught up yet), ``ok``,
    or ``degraded`` (what in ``problems``, and for how long)."""

    ready: bool
    status: Literal["starting", "ok", "degraded"]
    problems: dict[str, Any] = {}
    lag: int | None
    waiting_for: str | None
    applied: int
    skipped: int
    last_error: str | None
    partitions: dict[str, int]


def gate_view(record: WorkflowRecord) -> GateView | None:
    """The gate ``record`` waits at for a person, if it waits at one."""
    gate = record.gate
    if gate is None or record.state.value != "pending_approval":
        return None
    return GateView(
        workflow_id=record.workflow_id,
        flow=record.flow,
        flow_version=record.flow_version,
        gate=gate.gate,
        attempt=gate.attempt,
        assignee=gate.assignee,
        escalation_level=gate.escalation_level,
        opened_at=utc(gate.opened_at_ms),
        deadline=utc(gate.deadline_ms),
        token=gate.token,
    )


def wait_view(record: WorkflowRecord) -> WaitView | None:
    """The wait ``record`` is at, if it is awaiting input."""
    waiting = record.waiting
    if waiting is None or record.state.value != "awaiting_input":
        return None
    return WaitView(
        wait=waiting.wait,
        opened_at=utc(waiting.opened_at_ms),
        deadline=utc(waiting.deadline_ms),
        received=[
            SignalView(signal=r.signal, event_id=r.event_id, at=utc(r.at_ms))
            for r in waiting.received
        ],
    )


def summary_view(record: WorkflowRecord) -> WorkflowSummary:
    return WorkflowSummary(
        workflow_id=record.workflow_id,
        flow=record.flow,
        flow_version=record.flow_version,
        state=record.state.value,
        current=record.current,
        priority=record.priority.name.lower(),
        started_at=utc(record.started_at_ms),
        entered_state_at=utc(record.entered_current_state_at_ms),
        terminal_reason=record.terminal_reason,
    )


def detail_view(record: WorkflowRecord, history: list[TransitionEntry]) -> WorkflowDetail:
    compensation = record.compensation
    return WorkflowDetail(
        **summary_view(record).model_dump(),
        completed=list(record.completed_names),
        keys=dict(record.keys),
        open_gate=gate_view(record),
        open_wait=wait_view(record),
        pending_timers=[
            TimerView(kind=t.kind.value, ref=t.ref, due=utc(t.due_ms))
            for t in sorted(record.timers, key=lambda t: t.due_ms)
        ],
        compensation=None
        if compensation is None
        else CompensationView(
            cause=compensation.cause.value,
            reason=compensation.reason,
            in_flight=compensation.in_flight,
            remaining=list(compensation.remaining),
            undone=list(compensation.undone),
        ),
        trace_id=trace_id_of(record.traceparent),
        history=[
            TransitionView(
                event_id=h.event_id,
                from_state=h.from_state,
                to_state=h.to_state,
                step=h.step,
                at=utc(h.at_ms),
                time_in_previous_state_ms=h.time_in_previous_state_ms,
                cause_event_id=h.cause_event_id,
                partition=h.partition,
                offset=h.offset,
            )
            for h in history
        ],
        seal=SealView(
            chain=record.chain,
            chain_base=record.chain_base,
            dropped=record.sealed_dropped,
            events=[SealedEventView(**e.model_dump()) for e in record.sealed],
        ),
    )
