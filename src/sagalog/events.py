"""The platform's own events (``schemas/sagalog/v1``): what the tracker and the agent
runtime publish about workflows, as opposed to the business facts agents publish."""

from __future__ import annotations

import datetime as dt
import enum

from pydantic import BaseModel, ConfigDict

from sagalog.contracts.models import Event


class StepFailed(Event):
    """A workflow step failed for good; the tracker compensates."""

    event_type = "sagalog.v1.StepFailed"

    step: str
    reason: str
    error_class: str
    attempts: int
    retryable: bool = False


class StepRetryRequested(Event):
    """Run a step again on the event that started it: its budget gate was approved
    (``on_budget_exhausted: gate``). The agent finds that event in its projection,
    so the effects made before the refusal come back from its record."""

    event_type = "sagalog.v1.StepRetryRequested"

    step: str
    gate: str
    decided_by: str
    over_budget: bool = False
    attempt: int


class StateTransition(Event):
    """A workflow moved from one state to another."""

    event_type = "sagalog.v1.StateTransition"

    flow: str
    flow_version: int
    from_state: str
    to_state: str
    step: str | None = None
    cause_event_id: str
    time_in_previous_state_ms: int
    at: dt.datetime
    from_step: str | None = None


class GateOpened(Event):
    """A workflow waits for a person's decision."""

    event_type = "sagalog.v1.GateOpened"

    gate: str
    assignee: str
    token: str
    attempt: int
    deadline: dt.datetime
    escalation_level: int = 0


class GateDecision(enum.StrEnum):
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"


class GateDecided(Event):
    """A human gate was decided."""

    event_type = "sagalog.v1.GateDecided"

    gate: str
    token: str
    decision: GateDecision
    decided_by: str
    comment: str | None = None


class WebhookReceived(Event):
    """An outside system called the gateway's webhook for a workflow.

    The body is kept as JSON text rather than a typed record: webhooks are shaped by
    their senders, and an agent that cares about one parses ``payload_json`` itself.
    """

    event_type = "sagalog.v1.WebhookReceived"

    kind: str
    source: str
    payload_json: str
    received_at: dt.datetime


class WaitEnded(Event):
    """The tracker ended a flow's wait for outside events: every signal it needed
    arrived (``timed_out`` false), or its timeout passed and its default was
    ``continue``. The entry after the wait starts on it."""

    event_type = "sagalog.v1.WaitEnded"

    wait: str
    received: list[str]
    missing: list[str]
    timed_out: bool
    signal_event_ids: list[str]


class WorkflowMigrated(Event):
    """Move a running workflow to a later version of its flow (``sagalog flows migrate``);
    decided by the tracker with ``sagalog.tracker.migration``, refused when the workflow
    is no longer in ``expected_state`` at ``expected_current``."""

    event_type = "sagalog.v1.WorkflowMigrated"

    flow: str
    from_version: int
    to_version: int
    mapping: dict[str, str]
    expected_state: str
    expected_current: str | None = None
    migration_id: str
    requested_by: str


class SubjectErased(Event):
    """A data subject's personal-data keys were deleted (``sagalog erase``): what was
    sealed for them reads as erased from now on (``sagalog.personal``)."""

    event_type = "sagalog.v1.SubjectErased"

    subject_id: str
    key_ids: list[str]
    key_topic: str
    reason: str
    requested_by: str


class WorkflowCancelled(Event):
    """An operator cancelled a running workflow; the tracker compensates it."""

    event_type = "sagalog.v1.WorkflowCancelled"

    reason: str
    requested_by: str


class DeadLetterReplayed(Event):
    """An operator re-drove a dead letter to its origin topic as a new event."""

    event_type = "sagalog.v1.DeadLetterReplayed"

    dead_letter: str
    origin: str
    replayed_type: str | None = None
    original_event_id: str | None = None
    replay_event_id: str
    replay: int
    dead_lettered_by: str
    dead_letter_reason: str
    reason: str
    requested_by: str


class CompensationRequested(Event):
    """The tracker asks the agent that ran a step to undo it."""

    event_type = "sagalog.v1.CompensationRequested"

    step: str
    compensation: str
    attempt: int = 1
    reason: str = ""


class CompensationCompleted(Event):
    """An agent undid a step."""

    event_type = "sagalog.v1.CompensationCompleted"

    step: str
    compensation: str


class BudgetSpend(BaseModel):
    """A model call's claim on a budget, as the log carries it (``budgets.book.Spend``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ledger: str
    reservation: str
    reserved_at: dt.datetime
    estimate_tokens: int
    estimate_micros: int
    tokens: int | None = None
    cost_micros: int | None = None
    answered_at: dt.datetime | None = None


class EffectRecorded(Event):
    """An agent confirmed a side effect outside Kafka, with the intent it wrote down
    before the call and, when that call went unanswered (a crash), how it was settled
    (``sagalog.agents.intents``)."""

    event_type = "sagalog.v1.EffectRecorded"

    agent: str
    effect: str
    idempotency_key: str
    result_json: str
    dependency: str | None = None
    arguments_sha256: str | None = None
    intended_at: dt.datetime | None = None
    reconciliation: str | None = None
    spends: list[BudgetSpend] | None = None


class TrackerAlert(Event):
    """Something an operator must look at, published on ``sagalog.alerts`` and logged."""

    event_type = "sagalog.v1.TrackerAlert"

    alert: str
    message: str
    workflow_id: str | None = None
    flow: str | None = None
    flow_version: int | None = None
    value_ms: int | None = None
    at: dt.datetime
