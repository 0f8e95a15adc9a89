"""What the worker writes down around a batch's transaction: parking entries before
it, checkpoints and released parkings after it, and the counters and log line of
each record's outcome.

The order is the contract. A workflow whose event goes to the retry topic is parked
*before* the commit: an aborted transaction then leaves a parking entry at an offset
that is replayed, which the parking rule ignores (``triage.admit``), whereas parking
after the commit would leave a window where the workflow's next event overtakes it.
Checkpoints move *after* the commit, with the projection flush, so a crash never
leaves a checkpoint ahead of what was committed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from sagalog.agents.handling import Work
from sagalog.agents.outputs import Result
from sagalog.agents.records import headers_of
from sagalog.agents.state_store import StateStore
from sagalog.agents.telemetry import AgentTelemetry
from sagalog.agents.triage import Outcome
from sagalog.position import RecordPosition


def park_before_commit(store: StateStore, handled: Iterable[tuple[Work, Result]]) -> None:
    """Park every workflow whose event goes to the retry topic in this transaction."""
    for item, result in handled:
        if result.outcome.holds_workflow:
            store.park(item.headers.workflow_id, item.headers.id, item.origin.offset)


def next_checkpoints(
    positions: Iterable[RecordPosition], *, retry_topic: str
) -> dict[tuple[str, int], int]:
    """The checkpoint each input partition reaches with a committed batch: the offset
    after its last record. The retry topic has none: it is never hydrated."""
    last: dict[tuple[str, int], int] = {}
    for topic, partition, offset in positions:
        if topic != retry_topic:
            key = (topic, partition)
            if offset > last.get(key, -1):
                last[key] = offset
    return {key: offset + 1 for key, offset in last.items()}


def after_commit(
    store: StateStore,
    positions: Iterable[RecordPosition],
    handled: Iterable[tuple[Work, Result]],
    *,
    retry_topic: str,
) -> None:
    """Move the checkpoints, and release the parking of retried events that ended."""
    for (topic, partition), next_offset in next_checkpoints(
        positions, retry_topic=retry_topic
    ).items():
        store.set_checkpoint(topic, partition, next_offset)
    for item, result in handled:
        if item.from_retry and result.outcome.ends_parking:
            store.unpark(item.headers.workflow_id, item.headers.id)


def account(telemetry: AgentTelemetry, message: Any, result: Result) -> None:
    """Count one record's outcome and log it (a handled one only at INFO)."""
    stats = telemetry.stats
    outcome = result.outcome
    if outcome is Outcome.HANDLED:  # the hot path: counters only, a log line if asked for
        stats.handled += 1
        telemetry.step_seconds.observe(result.duration_ms / 1000)
        if not telemetry.logger.isEnabledFor(logging.INFO):
            return
    elif outcome is Outcome.SKIP:
        stats.ignored += 1
        return
    headers = {
        k: (v.decode() if isinstance(v, bytes) else v)
        for k, v in headers_of(message)
        if k.startswith("ce_")
    }
    fields: dict[str, Any] = {
        "workflow_id": headers.get("ce_workflowid"),
        "event_type": headers.get("ce_type"),
        "event_id": headers.get("ce_id"),
        "outcome": outcome.value,
        "duration_ms": round(result.duration_ms, 2),
        "step": result.step,
        "attempt": result.attempt,
    }
    match outcome:
        case Outcome.HANDLED:
            telemetry.log("handled", "handled", **fields)
        case Outcome.RETRY:
            stats.failed += 1
            stats.retried += 1
            telemetry.log("retry", result.error, level=logging.WARNING, **fields)
        case Outcome.DEFER:
            stats.deferred += 1
            telemetry.log("defer", result.error, **fields)
        case Outcome.PARK:
            stats.parked += 1
            telemetry.log("park", result.error, **fields)
        case Outcome.DEAD_LETTER:
            stats.failed += 1
            stats.dead_lettered += 1
            telemetry.log("dead_letter", result.error, level=logging.ERROR, **fields)
        case Outcome.GATED:
            stats.failed += 1
            telemetry.log("gated", result.error, level=logging.WARNING, **fields)
        case Outcome.DUPLICATE:
            stats.duplicates += 1
            telemetry.log("duplicate", "discarded a duplicate event id", **fields)
        case Outcome.HANDLE | Outcome.NOT_DUE | Outcome.SKIP:
            pass  # not a final outcome, or counted above
