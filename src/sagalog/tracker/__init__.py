"""The saga tracker's rules as plain functions: no faust, no Kafka, time passed in.

The tracker routes, tracks and signals; it never executes business logic. Its
decisions live here so they can be read and tested alone; the faust service only
feeds them (decode, ``decide``, store, perform actions, commit):

- ``machine.decide(record, input, flow=, now_ms=, secret=) -> Decision``: the state
  machine of one workflow (stored state in ``record``, inputs in ``inputs``, actions
  in ``actions``, the forward path in ``forward``, undoing in ``compensation``).
- ``timers``: timer keys ordered by due time, so a tick reads only due timers.
- ``gates``: HMAC resumption tokens of human gates.
- ``admission``: the per-flow limit on active workflows and who takes a freed slot.
- ``sla``: a flow's SLA rules over the state spans the transitions describe.
- ``testing.VirtualTracker``: the rules driven in memory with a time-skipping clock,
  as the faust service drives them (for tests; not imported here).
"""

from sagalog.tracker.actions import (
    TRACKER_SOURCE,
    TRANSITIONS_TOPIC,
    Action,
    Alert,
    CancelTimer,
    Decision,
    Outcome,
    Park,
    Publish,
    ScheduleTimer,
)
from sagalog.tracker.admission import ACTIVE_STATES, Admission, QueuedWorkflow, queue_key
from sagalog.tracker.compensation import CompensationRetry, compensation_plan
from sagalog.tracker.exceptions import GateSecretError, StoredRecordError, TrackerError
from sagalog.tracker.gates import gate_token, verify_gate_token
from sagalog.tracker.inputs import Admit, GateVerdict, TimerFired, TrackedEvent, TrackerInput
from sagalog.tracker.machine import decide, flow_for
from sagalog.tracker.record import (
    STORED_SCHEMA_VERSION,
    CompensationCause,
    CompensationProgress,
    CompletedEntry,
    GateProgress,
    WorkflowRecord,
)
from sagalog.tracker.sla import SlaAlert, Span, evaluate, spans_of
from sagalog.tracker.timers import (
    Timer,
    TimerIndex,
    TimerKind,
    TimerStore,
    decode_timer,
    due_range,
    encode_timer,
    timer_key,
)

__all__ = [
    "ACTIVE_STATES",
    "STORED_SCHEMA_VERSION",
    "TRACKER_SOURCE",
    "TRANSITIONS_TOPIC",
    "Action",
    "Admission",
    "Admit",
    "Alert",
    "CancelTimer",
    "CompensationCause",
    "CompensationProgress",
    "CompensationRetry",
    "CompletedEntry",
    "Decision",
    "GateProgress",
    "GateSecretError",
    "GateVerdict",
    "Outcome",
    "Park",
    "Publish",
    "QueuedWorkflow",
    "ScheduleTimer",
    "SlaAlert",
    "Span",
    "StoredRecordError",
    "Timer",
    "TimerFired",
    "TimerIndex",
    "TimerKind",
    "TimerStore",
    "TrackedEvent",
    "TrackerError",
    "TrackerInput",
    "WorkflowRecord",
    "compensation_plan",
    "decide",
    "decode_timer",
    "due_range",
    "encode_timer",
    "evaluate",
    "flow_for",
    "gate_token",
    "queue_key",
    "spans_of",
    "timer_key",
    "verify_gate_token",
]
