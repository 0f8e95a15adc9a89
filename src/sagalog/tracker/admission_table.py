"""Admission's state in the tracker's ``ADMISSION`` table, one partition's share at a time.

``admission`` holds the policy (pure: who may start, who takes a freed slot); this
keeps what the policy counts, in the table, so it survives a restart with the
records it belongs to:

- ``slot|<flow>|<workflow>`` while the workflow is active. A slot is a key per
  workflow, not a counter: writing it twice (a batch decided again after a crash)
  cannot leak or double-count a slot.
- ``queue|<flow>|<queue key>`` -> workflow id while it is queued; ``queue_key``
  orders the keys so that the next workflow to admit is the first.

Counting reads at most the share plus one slot key, and the queue at most the
free slots: the work is bounded by the limit, not by the number of workflows.
"""

from __future__ import annotations

from sagalog.flows.states import WorkflowState
from sagalog.tracker.admission import Admission, is_active, queue_key
from sagalog.tracker.inputs import Admit
from sagalog.tracker.record import WorkflowRecord
from sagalog.tracker.tables import Overlay, Table, prefix_end


def admits_new(overlay: Overlay, partition: int, flow: str, policy: Admission) -> bool:
    """Whether a new workflow of ``flow`` may start now in ``partition`` (else it queues)."""
    queued = _queue(overlay, partition, flow, limit=1)
    return policy.admits_new(active=_active(overlay, partition, flow, policy), queued=len(queued))


def track(
    overlay: Overlay,
    partition: int,
    policy: Admission,
    before: WorkflowRecord | None,
    after: WorkflowRecord,
) -> list[Admit]:
    """Keep the slot and queue entry of ``after``'s workflow; the queued workflows that
    a slot it freed admits (none when it freed none)."""
    slot = _slot_prefix(after.flow) + after.workflow_id.encode()
    if is_active(after.state):
        overlay.put(Table.ADMISSION, partition, slot, b"")
    else:
        overlay.delete(Table.ADMISSION, partition, slot)
    key = (
        _queue_prefix(after.flow)
        + queue_key(
            priority=after.priority, queued_at_ms=after.started_at_ms, workflow_id=after.workflow_id
        ).encode()
    )
    if after.state is WorkflowState.QUEUED:
        overlay.put(Table.ADMISSION, partition, key, after.workflow_id.encode())
    else:
        overlay.delete(Table.ADMISSION, partition, key)
    freed = before is not None and is_active(before.state) and not is_active(after.state)
    if not freed:
        return []
    free = policy.free_slots(active=_active(overlay, partition, after.flow, policy)) or 0
    return [Admit(workflow_id) for workflow_id in _queue(overlay, partition, after.flow, free)]


def _active(overlay: Overlay, partition: int, flow: str, policy: Admission) -> int:
    """Active workflows of ``flow`` in ``partition``, counted up to the share (no further)."""
    prefix = _slot_prefix(flow)
    limit = (policy.limit or 0) + 1
    return len(overlay.scan(Table.ADMISSION, partition, prefix, prefix_end(prefix), limit))


def _queue(overlay: Overlay, partition: int, flow: str, limit: int) -> list[str]:
    if limit <= 0:
        return []
    prefix = _queue_prefix(flow)
    rows = overlay.scan(Table.ADMISSION, partition, prefix, prefix_end(prefix), limit)
    return [value.decode() for _, value in rows]


def _slot_prefix(flow: str) -> bytes:
    return b"slot|" + flow.encode() + b"|"


def _queue_prefix(flow: str) -> bytes:
    return b"queue|" + flow.encode() + b"|"
