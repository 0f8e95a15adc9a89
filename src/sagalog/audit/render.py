"""An audit trail and its verification as text for a person, or JSON for a tool."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from sagalog.audit.reading import ReadStats
from sagalog.audit.trail import AuditTrail, TrailEntry
from sagalog.audit.verify import Verification
from sagalog.contracts.headers import (
    H_CAUSATION_ID,
    H_CHAIN,
    H_CONTENT_TYPE,
    H_HASH,
    H_ID,
    H_PREV_HASH,
    H_SOURCE,
    H_SPECVERSION,
    H_TIME,
    H_TYPE,
    H_WORKFLOW_ID,
)
from sagalog.events import EffectRecorded

_HASH_HEADERS = (H_HASH, H_PREV_HASH, H_CHAIN)
_SHOWN_ABOVE = frozenset(
    {
        *_HASH_HEADERS,
        H_ID,
        H_TYPE,
        H_SOURCE,
        H_TIME,
        H_CAUSATION_ID,
        H_WORKFLOW_ID,
        H_SPECVERSION,
        H_CONTENT_TYPE,
    }
)
"""Headers the text shows in their own place (or that say nothing new)."""


def to_json(
    trail: AuditTrail, *, verification: Verification | None = None, stats: ReadStats | None = None
) -> dict[str, Any]:
    """Everything the text shows, and every header and payload field in full."""
    w = trail.workflow
    body: dict[str, Any] = {
        "workflow": {
            "workflow_id": w.workflow_id,
            "flow": w.flow,
            "flow_version": w.flow_version,
            "state": w.state,
            "terminal_reason": w.terminal_reason,
            "record_source": w.source,
            "chain": w.chain,
            "sealed_events": len(w.sealed) + w.dropped,
            "sealed_dropped": w.dropped,
        },
        "history": [_entry_json(e) for e in trail.entries],
        "missing": [s.model_dump() for s in trail.missing],
        "notes": list(trail.notes),
    }
    if verification is not None:
        body["verification"] = {
            "ok": verification.ok,
            "events_checked": verification.events_checked,
            "transitions_checked": verification.transitions_checked,
            "findings": [
                {
                    "kind": f.kind.value,
                    "event_id": f.event_id,
                    "position": f.position,
                    "other_event_id": f.other_event_id,
                    "message": f.message,
                }
                for f in verification.findings
            ],
            "notes": list(verification.notes),
        }
    if stats is not None:
        body["read"] = {
            "records_read": stats.records_read,
            "seeks": stats.seeks,
            "seconds": round(stats.seconds, 4),
        }
    return body


def _entry_json(entry: TrailEntry) -> dict[str, Any]:
    record = entry.record
    body: dict[str, Any] = {
        "kind": entry.kind,
        "position": {"topic": record.topic, "partition": record.partition, "offset": record.offset},
        "log_time": _iso(record.timestamp_ms),
        "event_id": entry.event_id,
        "type": entry.event_type,
        "source": entry.source,
        "time": entry.time,
        "causation_id": entry.causation_id,
        "causation_path": list(entry.causation_path),
        "sealed_index": entry.sealed_index,
        "headers": entry.headers,
        "payload": entry.payload,
    }
    if entry.error:
        body["error"] = entry.error
    if entry.gate is not None:
        body["gate"] = {k: v for k, v in vars(entry.gate).items() if v is not None}
    if entry.model is not None:
        model = entry.model
        body["model_decision"] = {
            "model_id": model.model_id,
            "prompt_hash": model.prompt_hash,
            "input_refs": list(model.input_refs),
            "decided_at": model.decided_at,
            "parameters": model.parameters,
            "template_hash": model.template_hash,
            "input_hashes": model.input_hashes,
            "outcome": model.outcome,
        }
    return body


def to_text(
    trail: AuditTrail,
    *,
    verification: Verification | None = None,
    stats: ReadStats | None = None,
    headers: bool = True,
) -> str:
    """The history as a person reads it: one block per event, its transitions under it."""
    w = trail.workflow
    lines = [
        f"workflow  {w.workflow_id}",
        f"flow      {w.flow} v{w.flow_version}",
        f"state     {w.state}" + (f" ({w.terminal_reason})" if w.terminal_reason else ""),
        f"record    {w.source}; {len(w.sealed) + w.dropped} event(s) sealed, chain "
        + (f"{w.chain[:16]}..." if w.chain else "-"),
        "",
    ]
    number = 0
    for entry in trail.entries:
        if entry.kind == "transition":
            lines.append(_transition_line(entry))
            continue
        number += 1
        lines += _event_lines(number, entry, headers=headers)
    for sealed in trail.missing:
        lines.append(
            f"!! sealed event {sealed.event_id} at {sealed.topic}/{sealed.partition}@"
            f"{sealed.offset} was not found in the log"
        )
    lines += [f"note: {n}" for n in trail.notes]
    if verification is not None:
        lines += ["", *_verification_lines(verification)]
    if stats is not None:
        lines.append(
            f"\nread {stats.records_read} record(s) with {stats.seeks} seek(s) in "
            f"{stats.seconds * 1000:.0f} ms"
        )
    return "\n".join(lines)


def _event_lines(number: int, entry: TrailEntry, *, headers: bool) -> list[str]:
    kind = (entry.event_type or "?").rsplit(".", 1)[-1]
    record = entry.record
    lines = [
        f"{number:>3}. {entry.time or '-'}  {kind}  ({entry.source or '-'})",
        f"     id {entry.event_id}  at {record.position}  logged {_iso(record.timestamp_ms)}",
    ]
    if entry.causation_path:
        lines.append(f"     caused by {' <- '.join(entry.causation_path)}")
    if entry.gate is not None:
        gate = entry.gate
        if gate.action == "decided":
            comment = f" ({gate.comment})" if gate.comment else ""
            lines.append(
                f"     GATE {gate.gate}: {gate.decision} by {gate.decided_by} at {gate.at}{comment}"
            )
        else:
            lines.append(
                f"     GATE {gate.gate} opened for {gate.assignee} (attempt {gate.attempt}, "
                f"level {gate.escalation_level}), deadline {gate.deadline}"
            )
    if entry.model is not None:
        model = entry.model
        outcome = ", ".join(
            f"{k}={_short(v)}" for k, v in model.outcome.items() if isinstance(v, (str, int, float))
        )
        lines.append(
            f"     MODEL {model.model_id} decided at {model.decided_at}: {outcome}\n"
            f"           prompt {model.prompt_hash}; inputs {', '.join(model.input_refs) or '-'}"
        )
        if model.template_hash or model.parameters:
            settings = ", ".join(f"{k}={v}" for k, v in model.parameters.items()) or "-"
            lines.append(f"           template {model.template_hash or '-'}; parameters {settings}")
    effect = _effect_line(entry)
    if effect:
        lines.append(effect)
    if entry.error:
        lines.append(f"     payload: undecodable ({entry.error})")
    elif entry.payload is not None and entry.gate is None and entry.model is None and not effect:
        lines.append(f"     payload {json.dumps(entry.payload, ensure_ascii=False)}")
    if headers:
        rest = [f"{k}={v}" for k, v in entry.headers.items() if k not in _SHOWN_ABOVE]
        if rest:
            lines.append(f"     headers {' '.join(rest)}")
        for name in _HASH_HEADERS:
            if name in entry.headers:
                lines.append(f"     {name} {entry.headers[name]}")
    return lines


def _transition_line(entry: TrailEntry) -> str:
    payload = entry.payload or {}
    step = f" ({payload.get('step')})" if payload.get("step") else ""
    return (
        f"       -> tracker: {payload.get('from_state')} -> {payload.get('to_state')}{step}"
        f"  at {entry.record.position}"
    )


def _verification_lines(verification: Verification) -> list[str]:
    checked = (
        f"{verification.events_checked} event(s) and {verification.transitions_checked} "
        "transition(s) checked"
    )
    if verification.ok:
        lines = [f"verified: no modified, missing or reordered event ({checked})"]
    else:
        lines = [f"verification FAILED: {len(verification.findings)} finding(s) ({checked})"]
        lines += [f"  {f.kind.value.upper()}: {f.message}" for f in verification.findings]
    lines += [f"  note: {n}" for n in verification.notes]
    return lines


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat().replace("+00:00", "Z")


def _short(value: str | float) -> str:
    """A payload value for one line: a long text (a prompt) by its length only; --json
    has it whole."""
    text = str(value)
    return text if len(text) <= 200 else f"<{len(text):,} characters>"


def _effect_line(entry: TrailEntry) -> str | None:
    """An effect's intent, its reconciliation after a lost answer, and its result."""
    payload = entry.payload
    if entry.event_type != EffectRecorded.event_type or payload is None:
        return None
    line = f"     EFFECT {payload.get('effect')} key {payload.get('idempotency_key')}"
    if payload.get("intended_at") is not None:
        digest = str(payload.get("arguments_sha256") or "-")[:16]
        line += (
            f"\n           intended {payload['intended_at']} on {payload.get('dependency')} "
            f"(arguments sha256 {digest}...)"
        )
    if payload.get("reconciliation"):
        line += f"\n           reconciled {payload['reconciliation']}"
    return line + f"\n           result {payload.get('result_json')}"
