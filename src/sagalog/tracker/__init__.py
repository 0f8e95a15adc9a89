"""The saga tracker's rules as plain functions: no faust, no Kafka, time passed in.

The tracker routes, tracks and signals; it never executes business logic. Its
decisions live here so they can be read and tested alone; the faust service only
feeds them through ``processor.Processor`` (decide, publish, store, commit).

This package exports what its users need: the services (the tracker, the
gateway), the CLI, replay and audit. Everything else is imported by module path
from where it is defined:

- ``machine``: ``decide(record, input, flow=, now_ms=, secret=) -> Decision``, the
  state machine of one workflow (stored state in ``record``, inputs in ``inputs``,
  actions in ``actions``, the forward path in ``forward``, undoing in ``compensation``);
- ``processor``: the one driver of the rules (batches, parking, admission, timers);
  ``sagalog.testing.TrackerHarness`` runs it in memory with a time-skipping clock;
- ``timers``: timer keys ordered by due time, so a tick reads only due timers;
- ``gates``: HMAC resumption tokens of human gates;
- ``admission``: the per-flow limit on active workflows and who takes a freed slot;
- ``sla`` and ``sla_monitor``: a flow's SLA rules over the state spans the
  transitions describe, and the bounded memory that feeds them.
"""

from sagalog.tracker.actions import (
    TRACKER_SOURCE,
    TRANSITIONS_TOPIC,
    Alert,
    Decision,
    Outcome,
    Publish,
)
from sagalog.tracker.compensation import CompensationRetry
from sagalog.tracker.exceptions import GateSecretError, StoredRecordError, TrackerError
from sagalog.tracker.gates import gate_token, verify_gate_token
from sagalog.tracker.inputs import TrackedEvent
from sagalog.tracker.machine import decide
from sagalog.tracker.record import WorkflowRecord
from sagalog.tracker.sla import SlaAlert
from sagalog.tracker.sla_monitor import SlaMonitor

__all__ = [
    "TRACKER_SOURCE",
    "TRANSITIONS_TOPIC",
    "Alert",
    "CompensationRetry",
    "Decision",
    "GateSecretError",
    "Outcome",
    "Publish",
    "SlaAlert",
    "SlaMonitor",
    "StoredRecordError",
    "TrackedEvent",
    "TrackerError",
    "WorkflowRecord",
    "decide",
    "gate_token",
    "verify_gate_token",
]
