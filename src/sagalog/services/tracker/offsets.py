"""Which input offsets the tracker finished, so it can commit them itself.

faust commits what its streams acked, and keeps, per partition, every offset it did not
see (an ``IntervalTree`` of gaps) to avoid committing past one. Agents write in
transactions, so every hand-off leaves a gap (the commit marker), and that bookkeeping
(``_add_gap``, ``_new_offset``, intervaltree) is a large share of a busy tracker's CPU
(docs/design/tuning-measurements.md). The tracker needs none of it: a batch is finished
only when all of it is decided, published and stored (``processor.commit``), and batches
of a partition finish in order. So the source topic is read with acks off and this book
keeps, per partition, one number: the offset after the last record of the last finished
batch. A timer commits what moved.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any


class OffsetBook:
    """Finished and committed offsets per topic partition (faust ``TP``s)."""

    def __init__(self) -> None:
        self.finished: dict[Any, int] = {}
        self.committed: dict[Any, int] = {}

    def finish(self, messages: Iterable[Any]) -> None:
        """Record a finished batch: each partition's next offset is after its last record."""
        for message in messages:
            tp, after = message.tp, message.offset + 1
            if after > self.finished.get(tp, -1):
                self.finished[tp] = after

    def due(self, assigned: Collection[Any]) -> dict[Any, int]:
        """What to commit now: finished past committed, for partitions still assigned.

        ``clear`` on every revocation already forgets the partitions a worker loses;
        the assignment check stays as a cheap second guard, since committing for a
        partition another worker holds would move that worker's group position.
        """
        return {
            tp: offset
            for tp, offset in self.finished.items()
            if tp in assigned and offset > self.committed.get(tp, -1)
        }

    def mark_committed(self, offsets: dict[Any, int]) -> None:
        self.committed.update(offsets)

    def clear(self) -> None:
        """Forget everything: the partitions are being revoked.

        Whatever this worker is given next starts from the group's committed offsets,
        and what it finished before must never be committed again: a worker frozen
        through a rebalance, given a partition back, committed the offset it had
        finished before the freeze and moved the group back 400 records behind the
        worker that had it meanwhile (those records were decided again, as
        duplicates). Should the last commit have failed, the next owner decides the
        rest again: duplicates that change nothing.
        """
        self.finished.clear()
        self.committed.clear()
