"""The audit trail of one workflow, read from the log without scanning it, and verified.

- ``lookup``: the workflow's record by a point lookup (gateway, or the one records
  changelog partition of its key), with what the tracker sealed of its events;
- ``reading``: records by position, or through one bounded partition range;
- ``collect``: the record, the events at their sealed positions and the tracker's
  transitions, gathered into a trail;
- ``trail``: the history as an auditor reads it (pure): causation, gate decisions,
  model decisions with their lineage;
- ``verify``: modified, missing, reordered events against the seal and the hash
  links (pure; see ``sagalog.contracts.hash_chain``);
- ``render``: text and JSON.
"""

from sagalog.audit.collect import Collected, Sources, collect, find_workflow, parse_substitutes
from sagalog.audit.exceptions import AuditError, UnknownWorkflowError
from sagalog.audit.lookup import WorkflowSeal, partition_for
from sagalog.audit.reading import LoggedEvent, ReadStats, audit_consumer
from sagalog.audit.render import to_json, to_text
from sagalog.audit.trail import AuditTrail, TrailEntry, build_trail
from sagalog.audit.verify import Finding, FindingKind, Verification, verify

__all__ = [
    "AuditError",
    "AuditTrail",
    "Collected",
    "Finding",
    "FindingKind",
    "LoggedEvent",
    "ReadStats",
    "Sources",
    "TrailEntry",
    "UnknownWorkflowError",
    "Verification",
    "WorkflowSeal",
    "audit_consumer",
    "build_trail",
    "collect",
    "find_workflow",
    "parse_substitutes",
    "partition_for",
    "to_json",
    "to_text",
    "verify",
]
