"""Sealing: the tracker fixes the order and content of each workflow's events as it reads them.

Independent publishers cannot chain their events to one another (none sees the
others' output before publishing), but the tracker reads every event of a workflow,
in log order, from the one partition that holds it: it is the workflow's single
sequencer. So the tracker folds each event it reads into the workflow's record: its
position (for the audit, which fetches events by offset instead of scanning the
topic) and its content hash, chained (``chain = sha256(chain || hash)``). Every event
the tracker publishes carries that chain head, so the log itself holds the tracker's
testimony of what it had read by then, and ``sagalog audit --verify`` can tell a
modified, missing or reordered event from the record and the log.

Every event of a tracked workflow is sealed whatever the rules make of it (applied,
duplicate, stale, rejected, parked; the tracker's own echoes too): the audit trail
is what was in the log, not only what changed the state.

Sealing is idempotent by position: offsets grow within a partition, so an event at
or before the last sealed offset of its partition was sealed already (a batch read
again after a crash), and sealing it again changes nothing.
"""

from __future__ import annotations

from typing import Any

from sagalog.contracts.hash_chain import chain_next, chain_start
from sagalog.tracker.record import SEALED_EVENTS, SealedEvent, WorkflowRecord


def is_sealed(record: WorkflowRecord, event: SealedEvent) -> bool:
    """Whether ``event``'s position is at or before one already sealed in its partition."""
    for earlier in reversed(record.sealed):
        if earlier.topic == event.topic and earlier.partition == event.partition:
            return earlier.offset >= event.offset
    return False


def seal(record: WorkflowRecord, event: SealedEvent) -> WorkflowRecord | None:
    """The record with ``event`` sealed after its earlier events; None when it already was."""
    fields = sealing(record, event)
    return None if fields is None else record.model_copy(update=fields)


def sealing(record: WorkflowRecord, event: SealedEvent) -> dict[str, Any] | None:
    """The fields of ``record`` that sealing ``event`` changes; None when it already was.

    Past ``SEALED_EVENTS`` the oldest position is dropped from the list, and the
    chain value before the first listed one (``chain_base``) moves past it, so the
    listed hashes still recompute to the chain head. Fields rather than a record, so
    the processor copies a record once per event for the seal and the trace together
    (a pydantic copy is a tenth of the decision path).
    """
    if is_sealed(record, event):
        return None
    head = chain_next(chain_head(record), event.hash)
    sealed = (*record.sealed, event)
    base, dropped = record.chain_base, record.sealed_dropped
    if len(sealed) > SEALED_EVENTS:
        first, sealed = sealed[0], sealed[1:]
        base = chain_next(base or chain_start(record.workflow_id), first.hash)
        dropped += 1
    return {"chain": head, "sealed": sealed, "chain_base": base, "sealed_dropped": dropped}


def chain_head(record: WorkflowRecord) -> str:
    """The chain head a publisher stamps on the workflow's next event."""
    return record.chain or record.chain_base or chain_start(record.workflow_id)
