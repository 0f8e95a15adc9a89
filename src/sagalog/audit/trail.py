"""One workflow's history as an auditor reads it: pure assembly, no Kafka.

``build_trail`` takes the records the audit fetched (the workflow's events at the
positions the tracker sealed, and its transitions) and says, for each event, what
a person asks of an audit trail:

- the event itself: its type, id, source, time, headers and payload, and where it
  lies in the log;
- **why** it happened: its cause (``ce_causationid``) and the cause's cause, back
  to the request that started the workflow;
- for a human gate, **who** decided **what** and **when** (``GateDecided``), and to
  whom it was put and until when (``GateOpened``);
- for a model's decision (a payload with a ``lineage``, ``sagalog.v1.DecisionLineage``),
  which model decided, on which prompt (by hash), from which inputs;
- the tracker's transitions, each right after the event that caused it (a transition
  a timer caused is placed by its log time).

Gate tokens are shown shortened: an open gate's token decides the gate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sagalog.audit.lookup import WorkflowSeal
from sagalog.audit.reading import LoggedEvent
from sagalog.contracts.headers import H_CAUSATION_ID, H_ID, H_SOURCE, H_TIME, H_TYPE
from sagalog.contracts.json_values import jsonable
from sagalog.events import GateDecided, GateOpened
from sagalog.tracker.record import SealedEvent

Decoded = tuple[dict[str, Any] | None, str | None]
"""A record's payload, or why it did not decode."""

Decode = Callable[[bytes | None], Decoded]


@dataclass(frozen=True)
class GateRecord:
    """A human gate opened or decided."""

    gate: str
    action: str  # "opened" or "decided"
    at: str | None  # ce_time: when it was opened or decided
    decision: str | None = None
    decided_by: str | None = None
    comment: str | None = None
    assignee: str | None = None
    attempt: int | None = None
    escalation_level: int | None = None
    deadline: str | None = None


@dataclass(frozen=True)
class ModelDecision:
    """A decision a model made, with its lineage (``sagalog.v1.DecisionLineage``)."""

    model_id: str
    prompt_hash: str
    input_refs: tuple[str, ...]
    decided_at: str | None
    outcome: dict[str, Any]  # the rest of the payload: score, level, rationale, ...
    parameters: dict[str, str] = field(default_factory=dict)
    template_hash: str | None = None
    input_hashes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TrailEntry:
    """One event or transition of the history."""

    kind: str  # "event" or "transition"
    record: LoggedEvent
    event_id: str | None
    event_type: str | None
    source: str | None
    time: str | None
    causation_id: str | None
    causation_path: tuple[str, ...] = ()
    payload: dict[str, Any] | None = None
    error: str | None = None
    gate: GateRecord | None = None
    model: ModelDecision | None = None
    sealed_index: int | None = None

    @property
    def headers(self) -> dict[str, str]:
        return self.record.header_values


@dataclass(frozen=True)
class AuditTrail:
    """The history of one workflow, in order, and what could not be found of it."""

    workflow: WorkflowSeal
    entries: tuple[TrailEntry, ...]
    missing: tuple[SealedEvent, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def events(self) -> tuple[TrailEntry, ...]:
        return tuple(e for e in self.entries if e.kind == "event")

    @property
    def transitions(self) -> tuple[TrailEntry, ...]:
        return tuple(e for e in self.entries if e.kind == "transition")


def build_trail(
    workflow: WorkflowSeal,
    events: Sequence[LoggedEvent],
    transitions: Sequence[LoggedEvent],
    *,
    decode: Decode,
    missing: Sequence[SealedEvent] = (),
    notes: Sequence[str] = (),
) -> AuditTrail:
    """The history: ``events`` in the order given (the log's), each followed by the
    transitions it caused; ``missing``: sealed events not found in the log."""
    sealed_at = {(s.topic, s.partition, s.offset): i for i, s in enumerate(workflow.sealed)}
    causes = {e.header_values.get(H_ID, ""): e.header_values.get(H_CAUSATION_ID) for e in events}
    entries = [
        _entry(
            "event",
            e,
            decode,
            causes,
            sealed_at.get((e.topic, e.partition, e.offset)),
        )
        for e in events
    ]
    moves = [_entry("transition", t, decode, causes, None) for t in transitions]
    return AuditTrail(
        workflow=workflow,
        entries=tuple(_interleave(entries, moves)),
        missing=tuple(missing),
        notes=tuple(notes),
    )


def _entry(
    kind: str,
    record: LoggedEvent,
    decode: Decode,
    causes: Mapping[str, str | None],
    sealed_index: int | None,
) -> TrailEntry:
    headers = record.header_values
    event_type = headers.get(H_TYPE)
    payload, error = decode(record.value)
    shown = None if payload is None else jsonable(_shortened_tokens(payload))
    causation = headers.get(H_CAUSATION_ID)
    if kind == "transition" and payload is not None:
        causation = str(payload.get("cause_event_id") or causation or "") or None
    return TrailEntry(
        kind=kind,
        record=record,
        event_id=headers.get(H_ID),
        event_type=event_type,
        source=headers.get(H_SOURCE),
        time=headers.get(H_TIME),
        causation_id=causation,
        causation_path=causation_path(causation, causes),
        payload=shown,
        error=error,
        gate=_gate(event_type, shown, headers.get(H_TIME)),
        model=_model(shown),
        sealed_index=sealed_index,
    )


def causation_path(first: str | None, causes: Mapping[str, str | None]) -> tuple[str, ...]:
    """``first``, its cause, that one's cause, ... as far as ``causes`` knows (no cycles).

    The ids met are kept in a set: a workflow whose every event causes the next has
    paths as long as its history, and a scan of the path for each step made a
    500-record story cost seconds."""
    path: list[str] = []
    met: set[str] = set()
    current = first
    while current and current not in met:
        path.append(current)
        met.add(current)
        current = causes.get(current)
    return tuple(path)


def _interleave(events: list[TrailEntry], moves: list[TrailEntry]) -> list[TrailEntry]:
    """Each transition right after its cause; one caused by a timer (or whose cause is
    not in the history) after the last event logged before it."""
    after: dict[int, list[TrailEntry]] = {}
    index_of = {e.event_id: i for i, e in enumerate(events) if e.event_id}
    for move in moves:
        anchor = index_of.get(move.causation_id or "")
        if anchor is None:
            earlier = [
                i for i, e in enumerate(events) if e.record.timestamp_ms <= move.record.timestamp_ms
            ]
            anchor = earlier[-1] if earlier else -1
        after.setdefault(anchor, []).append(move)
    ordered = list(after.get(-1, []))
    for i, event in enumerate(events):
        ordered.append(event)
        ordered.extend(after.get(i, []))
    return ordered


def _gate(
    event_type: str | None, payload: Mapping[str, Any] | None, at: str | None
) -> GateRecord | None:
    if payload is None:
        return None
    if event_type == GateDecided.event_type:
        return GateRecord(
            gate=str(payload.get("gate")),
            action="decided",
            at=at,
            decision=_text(payload.get("decision")),
            decided_by=_text(payload.get("decided_by")),
            comment=_text(payload.get("comment")),
        )
    if event_type == GateOpened.event_type:
        return GateRecord(
            gate=str(payload.get("gate")),
            action="opened",
            at=at,
            assignee=_text(payload.get("assignee")),
            attempt=payload.get("attempt"),
            escalation_level=payload.get("escalation_level"),
            deadline=_text(payload.get("deadline")),
        )
    return None


def _model(payload: Mapping[str, Any] | None) -> ModelDecision | None:
    lineage = payload.get("lineage") if payload is not None else None
    if not isinstance(lineage, Mapping) or "model_id" not in lineage:
        return None
    assert payload is not None
    return ModelDecision(
        model_id=str(lineage["model_id"]),
        prompt_hash=str(lineage.get("prompt_hash", "")),
        input_refs=tuple(str(r) for r in lineage.get("input_refs") or ()),
        decided_at=_text(lineage.get("decided_at")),
        outcome={k: v for k, v in payload.items() if k != "lineage"},
        parameters={str(k): str(v) for k, v in (lineage.get("parameters") or {}).items()},
        template_hash=_text(lineage.get("template_hash")),
        input_hashes={str(k): str(v) for k, v in (lineage.get("input_hashes") or {}).items()},
    )


def _shortened_tokens(payload: Mapping[str, Any]) -> dict[str, Any]:
    token = payload.get("token")
    if isinstance(token, str) and len(token) > 12:
        return {**payload, "token": f"...{token[-6:]}"}
    return dict(payload)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
