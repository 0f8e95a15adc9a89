"""Live against rebuilt workflow records: the fields the rules decide, nothing else.

A record carries more than the rules' decisions: bookkeeping (recent event ids, the
time of the last event), and fields that other features add over time (the audit
trail's sealed event positions and chain head). Comparing whole records would
report every such addition as a mismatch, and a rebuild that does not reproduce
them (it has no positions to seal) would never agree. So the diff compares a
projection, ``DIFFED_FIELDS``, read from the stored JSON with defaults, so it
needs no particular record release on either side:

=========================  ===========================================================
``flow``, ``flow_version``  the flow version the workflow runs under
``state``                   its state
``current``                 the step or gate it is at (or stopped at)
``completed``               the steps and gates it got past, in order
``compensation.cause``      why it undoes its work
``compensation.in_flight``  the compensation requested and not yet done
``compensation.remaining``  the steps still to undo, next first
``compensation.undone``     the steps undone so far, in order
``gate``                    the open gate: name, attempt, escalation level, assignee
``timers``                  every pending timer: kind, what it bounds, due time
``priority``                its admission lane
``terminal_reason``         why it ended
=========================  ===========================================================

Times of entry (``started_at_ms`` ...) are not compared directly: every one of them
starts a timer, whose due time is.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

DIFFED_FIELDS = (
    "flow",
    "flow_version",
    "state",
    "current",
    "completed",
    "compensation.cause",
    "compensation.in_flight",
    "compensation.remaining",
    "compensation.undone",
    "gate",
    "timers",
    "priority",
    "terminal_reason",
)

RECORD = "(record)"
"""The ``field`` of a mismatch where one side has no record of the workflow at all."""


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One difference: ``live`` is the tracker's value, ``rebuilt`` the replay's.

    For a workflow missing on one side, ``field`` is ``RECORD`` and that side's
    value is None (the other side's is its state).
    """

    workflow_id: str
    field: str
    live: Any
    rebuilt: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "field": self.field,
            "live": self.live,
            "rebuilt": self.rebuilt,
        }


def decided_fields(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The ``DIFFED_FIELDS`` of a stored record (its JSON, as a dict)."""
    compensation = stored.get("compensation") or {}
    gate = stored.get("gate")
    return {
        "flow": stored.get("flow"),
        "flow_version": stored.get("flow_version"),
        "state": stored.get("state"),
        "current": stored.get("current"),
        "completed": [entry.get("name") for entry in stored.get("completed") or ()],
        "compensation.cause": compensation.get("cause"),
        "compensation.in_flight": compensation.get("in_flight"),
        "compensation.remaining": list(compensation.get("remaining") or ()),
        "compensation.undone": list(compensation.get("undone") or ()),
        "gate": _gate(gate) if gate else None,
        "timers": sorted(_timer(t) for t in stored.get("timers") or ()),
        "priority": stored.get("priority"),
        "terminal_reason": stored.get("terminal_reason"),
    }


def compare(workflow_id: str, live: bytes | None, rebuilt: bytes | None) -> list[Mismatch]:
    """The mismatches between one workflow's live and rebuilt records (stored JSON)."""
    if live is None and rebuilt is None:
        return []
    if live is None or rebuilt is None:
        other = json.loads(rebuilt if live is None else live)  # type: ignore[arg-type]
        present = other.get("state")
        return [
            Mismatch(
                workflow_id,
                RECORD,
                None if live is None else present,
                None if rebuilt is None else present,
            )
        ]
    before, after = decided_fields(json.loads(live)), decided_fields(json.loads(rebuilt))
    return [
        Mismatch(workflow_id, name, before[name], after[name])
        for name in DIFFED_FIELDS
        if before[name] != after[name]
    ]


def diff_sorted(
    live: Iterable[tuple[str, bytes]], rebuilt: Iterable[tuple[str, bytes]]
) -> Iterator[Mismatch]:
    """Every mismatch between two streams of (workflow id, stored record), each sorted by id.

    A merge, so neither side is held in memory.
    """
    live_it, rebuilt_it = iter(live), iter(rebuilt)
    left, right = next(live_it, None), next(rebuilt_it, None)
    while left is not None or right is not None:
        if right is None or (left is not None and left[0] < right[0]):
            assert left is not None
            yield from compare(left[0], left[1], None)
            left = next(live_it, None)
        elif left is None or right[0] < left[0]:
            yield from compare(right[0], None, right[1])
            right = next(rebuilt_it, None)
        else:
            yield from compare(left[0], left[1], right[1])
            left, right = next(live_it, None), next(rebuilt_it, None)


def merged_by_id(streams: Iterable[Iterable[tuple[str, bytes]]]) -> Iterator[tuple[str, bytes]]:
    """Streams sorted by workflow id (one per partition) as one sorted stream."""
    return heapq.merge(*streams, key=lambda row: row[0])


def _gate(gate: Mapping[str, Any]) -> str:
    return (
        f"{gate.get('gate')}#{gate.get('attempt', 1)} level {gate.get('escalation_level', 0)}"
        f" -> {gate.get('assignee')}"
    )


def _timer(timer: Mapping[str, Any]) -> str:
    return f"{timer.get('kind')}:{timer.get('ref')}@{timer.get('due_ms')}"
