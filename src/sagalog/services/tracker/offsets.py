"""Which input offsets the tracker finished, so it can commit them itself.

faust commits what its streams acked, and keeps, per partition, every offset it
did not see (an ``IntervalTree`` of gaps) to avoid committing past one. Agents
write in transactions, so every hand-off leaves a gap (the commit marker): in the
saga benchmark that bookkeeping was a fifth of the tracker's CPU (``_add_gap``,
``_new_offset``, intervaltree). The tracker needs none of it: a batch is finished
only when all of it is decided, published and stored (``processor.commit``), and
batches of a partition finish in order. So the source topic is read with acks off
and this book keeps, per partition, one number: the offset after the last record
of the last finished batch. A timer commits what moved.
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

        Partitions no longer assigned are forgotten: their next owner starts from
        the last commit and re-decides the rest, which the tracker turns into
        duplicates that change nothing.
        """
        for tp in [tp for tp in self.finished if tp not in assigned]:
            self.forget(tp)
        return {
            tp: offset
            for tp, offset in self.finished.items()
            if offset > self.committed.get(tp, -1)
        }

    def mark_committed(self, offsets: dict[Any, int]) -> None:
        self.committed.update(offsets)

    def forget(self, tp: Any) -> None:
        self.finished.pop(tp, None)
        self.committed.pop(tp, None)
