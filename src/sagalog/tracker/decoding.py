"""A consumed record as the rules see it, or the reason it cannot be read.

Only headers are needed for most events (type, id, workflow, time): a business
payload is never decoded. The few platform events whose payload the rules read
(``StepFailed``, ``CompensationCompleted``, ``GateDecided``, and ``WebhookReceived``
for its kind) are decoded with the registry's schema. The tracker's own
``GateOpened``, ``CompensationRequested`` and ``WaitEnded``,
which it reads back from the workflow topic, are recognized from their headers and
not decided again (only sealed into the workflow's record, for the audit trail). An
``OpenTransactionClosed`` (``sagalog.open_transactions``), the tracker's or an agent's,
belongs to no workflow and is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders, RawHeaders
from sagalog.errors import SagalogError
from sagalog.flows.model import (
    COMPENSATION_COMPLETED,
    COMPENSATION_REQUESTED,
    GATE_DECIDED,
    GATE_OPENED,
    STEP_FAILED,
    STEP_RETRY_REQUESTED,
    WAIT_ENDED,
    WEBHOOK_RECEIVED,
    WORKFLOW_CANCELLED,
    WORKFLOW_MIGRATED,
    Flow,
)
from sagalog.open_transactions import OPEN_TRANSACTION_CLOSED
from sagalog.tracker.actions import TRACKER_SOURCE
from sagalog.tracker.inputs import TrackedEvent

NEEDS_PAYLOAD = frozenset(
    {
        STEP_FAILED,
        COMPENSATION_COMPLETED,
        GATE_DECIDED,
        WEBHOOK_RECEIVED,
        WORKFLOW_MIGRATED,
        WORKFLOW_CANCELLED,
    }
)
OWN_ECHOES = frozenset({GATE_OPENED, COMPENSATION_REQUESTED, WAIT_ENDED, STEP_RETRY_REQUESTED})


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Why a record cannot be tracked; it goes to the dead-letter topic with this reason."""

    reason: str
    error_class: str


@dataclass(frozen=True, slots=True)
class OwnEcho:
    """The tracker's own output read back: nothing to decide, only to seal."""

    workflow_id: str
    event_id: str


@dataclass(frozen=True, slots=True)
class Closer:
    """An ``OpenTransactionClosed`` read back: no workflow's, nothing to do."""

    event_id: str


def is_own_echo(meta: EventHeaders) -> bool:
    """Whether a record is the tracker's own request read back, which it only seals.

    Deciding its own ``GateOpened`` or ``CompensationRequested`` again would be
    deciding one input twice; every other event it publishes to a workflow topic
    (a gate default's ``GateDecided``) is an input like an agent's.
    """
    return meta.source == TRACKER_SOURCE and meta.type in OWN_ECHOES


def payload_types(flows: Iterable[Flow]) -> frozenset[str]:
    """The event types whose payload ``decide`` reads: the platform's few, and the
    starting event of every flow with correlation keys (their values are in it)."""
    return NEEDS_PAYLOAD | {f.starts_on for f in flows if f.correlation_keys}


def read_event(
    codec: EventCodec,
    key: bytes | None,
    value: bytes | None,
    headers: RawHeaders,
    *,
    needs_payload: frozenset[str] = NEEDS_PAYLOAD,
) -> TrackedEvent | Unreadable | OwnEcho | Closer:
    """The ``TrackedEvent`` in a record, an ``OwnEcho``, a ``Closer``, or ``Unreadable``
    with the reason.

    ``needs_payload``: the types to decode (``payload_types``); others are read from
    their headers alone.
    """
    try:
        meta = EventHeaders.from_kafka(headers)
    except SagalogError as exc:
        return Unreadable(str(exc), type(exc).__name__)
    if is_own_echo(meta):
        return OwnEcho(meta.workflow_id, meta.id)
    if meta.type == OPEN_TRANSACTION_CLOSED:
        return Closer(meta.id)
    if key is not None and key.decode(errors="replace") != meta.workflow_id:
        return Unreadable(
            f"record key {key!r} differs from header ce_workflowid {meta.workflow_id!r}; "
            "key every event by its workflow id so a workflow's events share a partition",
            "KeyMismatch",
        )
    payload = None
    if meta.type in needs_payload:
        try:
            payload = codec.decode(value).payload
        except SagalogError as exc:
            return Unreadable(str(exc), type(exc).__name__)
    try:
        return TrackedEvent.from_headers(meta, payload)
    except ValueError as exc:
        return Unreadable(f"event {meta.id} is not trackable: {exc}", type(exc).__name__)
