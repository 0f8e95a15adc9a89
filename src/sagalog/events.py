"""The platform's own events (``schemas/sagalog/v1``): what the tracker and the agent
runtime publish about workflows, as opposed to the business facts agents publish."""

from __future__ import annotations

import datetime as dt
import enum

from pydantic import BaseModel, ConfigDict

from sagalog.contracts.avro_types import Int32
from sagalog.contracts.models import Event


class StepFailed(Event):
    """A workflow step failed for good (retries exhausted or a non-retryable error); the
    tracker compensates."""

    event_type = "sagalog.v1.StepFailed"

    step: str
    """The step name from the flow definition."""
    reason: str
    """Why it failed, for a person."""
    error_class: str
    """The exception or error code."""
    attempts: Int32
    """How many attempts were made."""
    retryable: bool = False
    """Whether the last error was of a retryable class."""


class StepRetryRequested(Event):
    """The tracker asks the step's agent to run the step again on the event that started it:
    a person approved its budget gate (on_budget_exhausted: gate).

    The agent finds that event in its projection, so the effects made before the refusal
    come back from its record.
    """

    event_type = "sagalog.v1.StepRetryRequested"

    step: str
    """The step to run again, from the flow definition."""
    gate: str
    """The gate whose approval asks for it."""
    decided_by: str
    """Who approved (the gate's default, when its deadline passed)."""
    over_budget: bool = False
    """The run's model calls may go over their budgets: they are counted, not refused."""
    attempt: Int32
    """Which opening of the gate approved it (1 for the first)."""


class StateTransition(Event):
    """A workflow moved from one state to another: the raw material for analytics and
    alerts."""

    event_type = "sagalog.v1.StateTransition"

    flow: str
    flow_version: Int32
    from_state: str
    to_state: str
    step: str | None = None
    """The current step, when running."""
    cause_event_id: str
    """The ce_id of the event that caused the transition."""
    time_in_previous_state_ms: int
    at: dt.datetime
    from_step: str | None = None
    """The step of the state left (the step field of the transition that entered it)."""


class GateOpened(Event):
    """A workflow waits for a person's decision at a human gate."""

    event_type = "sagalog.v1.GateOpened"

    gate: str
    assignee: str
    token: str
    """The resumption token a decision must carry (HMAC, bound to workflow, gate and
    attempt)."""
    attempt: Int32
    deadline: dt.datetime
    escalation_level: Int32 = 0


class GateDecision(enum.StrEnum):
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"


class GateDecided(Event):
    """A person (or the gate's default at its deadline) decided a human gate."""

    event_type = "sagalog.v1.GateDecided"

    gate: str
    token: str
    decision: GateDecision
    decided_by: str
    comment: str | None = None


class WebhookReceived(Event):
    """An outside system called the gateway's webhook for a workflow (a signature service, a
    payment provider); its body is kept verbatim as JSON text.

    The body is kept as JSON text rather than a typed record: webhooks are shaped by
    their senders, and an agent that cares about one parses ``payload_json`` itself.
    """

    event_type = "sagalog.v1.WebhookReceived"

    kind: str
    """What the webhook reports, from its URL: /v1/webhooks/{kind}."""
    source: str
    """Who called, as the caller named itself (X-Webhook-Source), or the gateway's
    default."""
    payload_json: str
    """The request body, as valid JSON text."""
    received_at: dt.datetime


class WaitEnded(Event):
    """The tracker ended a flow's wait for outside events: all the signals it needed
    arrived, or its timeout passed and its default was continue. The entry after the wait
    starts on it."""

    event_type = "sagalog.v1.WaitEnded"

    wait: str
    """The wait's name in the flow."""
    received: list[str]
    """The signals that arrived, in arrival order."""
    missing: list[str]
    """The signals still missing (empty unless timed_out, or mode any)."""
    timed_out: bool
    signal_event_ids: list[str]
    """The ce_id of each received signal, in the order of received."""


class WorkflowMigrated(Event):
    """A request to move a running workflow to a later version of its flow (sagalog flows
    migrate --apply). The tracker decides it with the rule the dry run ran, and refuses it
    when the workflow has moved on since the dry run.

    The rule is ``sagalog.tracker.migration``: refused when the workflow is no longer in
    ``expected_state`` at ``expected_current``.
    """

    event_type = "sagalog.v1.WorkflowMigrated"

    flow: str
    from_version: Int32
    to_version: Int32
    mapping: dict[str, str]
    """Entries renamed: old name to new name; the others keep their names."""
    expected_state: str
    """The state the dry run saw."""
    expected_current: str | None = None
    """The current entry the dry run saw."""
    migration_id: str
    """One id for every workflow of one apply."""
    requested_by: str


class SubjectErased(Event):
    """A data subject's personal-data keys were deleted (sagalog erase): every field sealed
    for this subject now reads as erased, in every topic and every replay, while the log and
    its hash chain stay whole.

    What was sealed for the subject is ``sagalog.personal``'s to read as erased.
    """

    event_type = "sagalog.v1.SubjectErased"

    subject_id: str
    """The subject's opaque id (a keyed hash of the identifying value), as the envelopes
    carry it."""
    key_ids: list[str]
    """The data keys deleted; empty when the subject had none left."""
    key_topic: str
    """The compacted topic the keys were tombstoned in."""
    reason: str
    """Why, for the audit (e.g. the request's reference)."""
    requested_by: str


class WorkflowCancelled(Event):
    """An operator cancelled a running workflow (sagalog workflows cancel, through the
    gateway): the tracker compensates what it did, the step running included."""

    event_type = "sagalog.v1.WorkflowCancelled"

    reason: str
    """Why, in the operator's words; kept in the audit and the terminal reason."""
    requested_by: str
    """Who asked."""


class DeadLetterReplayed(Event):
    """An operator re-drove a dead-lettered record to the topic it was first consumed from,
    as a new event (sagalog dlq replay, through the gateway). Published on the workflow's
    topic just before the replay, so the workflow's audit trail says who asked, why, and
    which event the replay is."""

    event_type = "sagalog.v1.DeadLetterReplayed"

    dead_letter: str
    """Where the dead letter lies: topic/partition/offset in its dead-letter topic."""
    origin: str
    """Where the record was first consumed, and where the replay goes:
    topic/partition/offset."""
    replayed_type: str | None = None
    """The replayed record's ce_type, if it had one."""
    original_event_id: str | None = None
    """The dead-lettered record's ce_id, if it had one."""
    replay_event_id: str
    """The replay's new ce_id: consumers take it as a new event."""
    replay: Int32
    """Which replay of this dead letter: 1 for the first, more only when asked again
    (--again)."""
    dead_lettered_by: str
    """The agent (or the tracker's app id) that dead-lettered the record."""
    dead_letter_reason: str
    """Why it was dead-lettered, as its header said (cut to 2000 characters)."""
    reason: str
    """Why it is replayed, in the operator's words."""
    requested_by: str
    """Who asked."""


class CompensationRequested(Event):
    """The tracker asks the agent that ran a step to undo it (one step at a time, in reverse
    order)."""

    event_type = "sagalog.v1.CompensationRequested"

    step: str
    """The step to undo."""
    compensation: str
    """The compensation action named in the flow."""
    attempt: Int32 = 1
    reason: str = ""
    """Why the workflow is compensating."""


class CompensationCompleted(Event):
    """An agent undid a step; the tracker moves on to the previous one."""

    event_type = "sagalog.v1.CompensationCompleted"

    step: str
    compensation: str


class BudgetSpend(BaseModel):
    """A model call's claim on a budget (sagalog.budgets): reserved before the call, settled
    to the usage the model reported. Whoever takes the workflow's partition over folds it
    into its ledgers.

    The log's form of ``budgets.book.Spend``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    ledger: str
    """The budget, or budget/key (a tenant)."""
    reservation: str
    """The call's idempotency key; <key>#<n> for a call repeated after its answer was
    lost."""
    reserved_at: dt.datetime
    """Where the budget's windows count it."""
    estimate_tokens: int
    estimate_micros: int
    """Money reserved, in millionths of the currency unit."""
    tokens: int | None = None
    """The tokens the model reported (prompt and answer); null while unknown (a call whose
    answer was lost)."""
    cost_micros: int | None = None
    answered_at: dt.datetime | None = None
    """When the model answered: the call's tokens hold the budget's window until 60 s
    after."""


class EffectRecorded(Event):
    """An agent confirmed a side effect outside Kafka; replayed, it tells any instance not
    to repeat it. It carries the intent written before the call and, for a call whose answer
    was lost (a crash), how it was reconciled.

    The intent and its reconciliation are ``sagalog.agents.intents``'.
    """

    event_type = "sagalog.v1.EffectRecorded"

    agent: str
    effect: str
    """The effect's name, e.g. ledger.reserve."""
    idempotency_key: str
    """The key handed to the dependency."""
    result_json: str
    """The recorded result, as JSON."""
    dependency: str | None = None
    """The dependency called (its circuit breaker's name)."""
    arguments_sha256: str | None = None
    """SHA-256 of the call's arguments as canonical JSON, from the intent."""
    intended_at: dt.datetime | None = None
    """When the intent was written down, before the call."""
    reconciliation: str | None = None
    """Null for a call answered at once; else how an earlier call without a recorded result
    was settled: found (by the dependency's lookup), not_found_called_again or called_again,
    with a sentence."""
    spends: list[BudgetSpend] | None = None
    """The budgets this call was counted in; null for an effect that is not a model call."""


class TrackerAlert(Event):
    """Something an operator must look at: a compensation stuck past its timeout, an effect
    after a workflow ended, an SLA rule firing.

    Published on ``sagalog.alerts`` and logged.
    """

    event_type = "sagalog.v1.TrackerAlert"

    alert: str
    """The alert's name: compensation_stuck, effect_after_end, or an SLA rule's name."""
    message: str
    """What happened and what to do, for a person."""
    workflow_id: str | None = None
    """The workflow concerned; null for an SLA rule over many."""
    flow: str | None = None
    flow_version: Int32 | None = None
    value_ms: int | None = None
    """For an SLA rule: the statistic observed."""
    at: dt.datetime
