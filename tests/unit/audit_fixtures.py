"""A small sealed workflow history, built the way the publishers and the tracker build it.

Values are JSON (the audit's pure parts never decode Avro; ``decode`` stands in).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from sagalog.audit.lookup import WorkflowSeal
from sagalog.audit.reading import LoggedEvent
from sagalog.contracts.hash_chain import chain_next, chain_start, content_hash, signed
from sagalog.tracker.record import SealedEvent

WORKFLOW = "wf-7"
TOPIC = "orders.events"
TRANSITIONS = "sagalog.transitions"
TRACKER = "sagalog/saga-tracker"


def decode(value: bytes | None) -> tuple[dict[str, Any] | None, str | None]:
    if value is None:
        return None, "no value"
    try:
        return json.loads(value), None
    except ValueError as exc:
        return None, str(exc)


def record(
    topic: str,
    offset: int,
    event_type: str,
    event_id: str,
    payload: dict[str, Any],
    *,
    source: str = "test/agent",
    cause: str | None = None,
    prev_hash: str | None = None,
    chain: str | None = None,
    at_ms: int = 0,
    sign: bool = True,
) -> LoggedEvent:
    headers: list[tuple[str, str | bytes | None]] = [
        ("ce_id", event_id),
        ("ce_type", event_type),
        ("ce_source", source),
        ("ce_time", f"2027-01-15T08:00:{offset:02d}Z"),
        ("ce_workflowid", WORKFLOW),
    ]
    if cause:
        headers.append(("ce_causationid", cause))
    if prev_hash:
        headers.append(("sagalog_prev_hash", prev_hash))
    if chain:
        headers.append(("sagalog_chain", chain))
    key, value = WORKFLOW.encode(), json.dumps(payload).encode()
    if sign:
        headers = signed(key, value, headers)
    return LoggedEvent(
        topic=topic,
        partition=0,
        offset=offset,
        timestamp_ms=at_ms or 1_000 * (offset + 1),
        key=key,
        value=value,
        headers=tuple((n, v.encode() if isinstance(v, str) else v) for n, v in headers),
    )


def hash_of(event: LoggedEvent) -> str:
    return content_hash(event.key, event.value, event.headers)


def resigned(event: LoggedEvent, **payload: Any) -> LoggedEvent:
    """``event`` with its payload changed and its hash header recomputed (a careful forger)."""
    value = json.dumps({**json.loads(event.value or b"{}"), **payload}).encode()
    plain = [(n, v) for n, v in event.headers if n != "sagalog_hash"]
    headers = signed(event.key, value, plain)
    return replace(
        event,
        value=value,
        headers=tuple((n, v.encode() if isinstance(v, str) else v) for n, v in headers),
    )


@dataclass
class History:
    seal: WorkflowSeal
    events: list[LoggedEvent]
    transitions: list[LoggedEvent]

    def event(self, event_id: str) -> LoggedEvent:
        return next(e for e in self.events if e.header_values["ce_id"] == event_id)


def history() -> History:
    """Submitted -> Reserved -> (tracker) GateOpened -> GateDecided -> RiskScored, with the
    tracker's transitions, each stamped with the chain that includes its cause."""
    chain = chain_start(WORKFLOW)
    events: list[LoggedEvent] = []
    chains: dict[str, str] = {}

    def add(event: LoggedEvent) -> LoggedEvent:
        nonlocal chain
        events.append(event)
        chain = chain_next(chain, hash_of(event))
        chains[event.header_values["ce_id"]] = chain
        return event

    submitted = add(record(TOPIC, 0, "procurement.v1.RequestSubmitted", "e0", {"amount": "100"}))
    add(
        record(
            TOPIC,
            1,
            "procurement.v1.BudgetReserved",
            "e1",
            {"amount": "100"},
            cause="e0",
            prev_hash=hash_of(submitted),
        )
    )
    opened = add(
        record(
            TOPIC,
            3,
            "sagalog.v1.GateOpened",
            "e2",
            {
                "gate": "manager_approval",
                "assignee": "managers@example.com",
                "token": "g1.secret-token-value",
                "attempt": 1,
                "deadline": "2027-01-18T08:00:00Z",
                "escalation_level": 0,
            },
            source=TRACKER,
            cause="e1",
            chain=chains["e1"],
        )
    )
    decided = add(
        record(
            TOPIC,
            4,
            "sagalog.v1.GateDecided",
            "e3",
            {
                "gate": "manager_approval",
                "token": "g1.secret-token-value",
                "decision": "APPROVED",
                "decided_by": "ana@example.com",
                "comment": None,
            },
            source="sagalog/gateway",
            cause="e2",
            prev_hash=hash_of(opened),
        )
    )
    add(
        record(
            TOPIC,
            6,
            "procurement.v1.RiskScored",
            "e4",
            {
                "score": 0.2,
                "level": "LOW",
                "lineage": {
                    "model_id": "risk-model-3",
                    "prompt_hash": "sha256:abc",
                    "input_refs": ["e0", "doc-9"],
                    "decided_at": "2027-01-15T08:00:06Z",
                },
            },
            cause="e3",
            prev_hash=hash_of(decided),
        )
    )
    transitions = [
        record(
            TRANSITIONS,
            10,
            "sagalog.v1.StateTransition",
            "t0",
            {"from_state": "initiated", "to_state": "running", "cause_event_id": "e0"},
            source=TRACKER,
            cause="e0",
            chain=chains["e0"],
            at_ms=1_500,
        ),
        record(
            TRANSITIONS,
            11,
            "sagalog.v1.StateTransition",
            "t1",
            {"from_state": "running", "to_state": "running", "cause_event_id": "timer:x"},
            source=TRACKER,
            cause="timer:x",
            chain=chains["e2"],
            at_ms=4_500,
        ),
        record(
            TRANSITIONS,
            12,
            "sagalog.v1.StateTransition",
            "t2",
            {"from_state": "running", "to_state": "completed", "cause_event_id": "e4"},
            source=TRACKER,
            cause="e4",
            chain=chains["e4"],
            at_ms=7_500,
        ),
    ]
    sealed = tuple(
        SealedEvent(
            topic=e.topic,
            partition=e.partition,
            offset=e.offset,
            event_id=e.header_values["ce_id"],
            hash=hash_of(e),
        )
        for e in events
    )
    seal = WorkflowSeal(
        workflow_id=WORKFLOW,
        flow="orders",
        flow_version=1,
        state="completed",
        terminal_reason=None,
        chain=chain,
        chain_base=None,
        dropped=0,
        sealed=sealed,
        source="test",
    )
    return History(seal=seal, events=events, transitions=transitions)
