"""What the processor remembers of committed batches, so the next batch reads less.

A workflow's events come one hand-off apart, so each lands in a batch of its own:
without a memory, every event reads its workflow's record from RocksDB and parses
its JSON again, and every change of a record scans the parked table for events
held for it, which is almost always empty. This keeps:

- **records**: the decoded records of the workflows changed last (a bounded LRU),
  as the last committed batch left them. A record enters only once its batch
  committed (``Processor.commit``) and leaves as soon as any batch writes its key,
  so a batch that fails, or a writer that bypasses the processor, never leaves a
  stale copy behind.
- **parked**: per partition, the workflows that may have parked events. Loaded by
  one scan of the partition's parked table the first time it is needed, grown as
  soon as an event is parked (growing early is always safe), shrunk only after a
  commit showed a workflow's parked events gone.

Both are forgotten when the worker's partitions change hands (``forget``): another
worker may have changed the tables meanwhile.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from sagalog.tracker.record import WorkflowRecord

#: Records kept by default: above the workflows in flight at the tracker's maximum
#: rate on a small machine (a few hundred), small beside a worker's memory (a decoded
#: record of a five-step flow takes ~9 KB).
RECORDS_KEPT = 512

Key = tuple[int, str]
"""(partition, workflow id)."""


class CommittedMemo:
    """See the module docstring.

    Args:
        keep: how many records to keep (0: none; every read goes to the tables).
    """

    def __init__(self, keep: int = RECORDS_KEPT) -> None:
        self.keep = keep
        self._records: OrderedDict[Key, WorkflowRecord] = OrderedDict()
        self._parked: dict[int, set[str]] = {}
        self.hits = 0
        self.misses = 0

    # -- records ------------------------------------------------------------------

    def record(self, key: Key) -> WorkflowRecord | None:
        """The committed record of ``key`` when it is kept (None: read the tables)."""
        record = self._records.get(key)
        if record is None:
            self.misses += 1
            return None
        self._records.move_to_end(key)
        self.hits += 1
        return record

    def written(self, key: Key) -> None:
        """A batch writes ``key``: the kept copy may not be what gets committed."""
        self._records.pop(key, None)

    def committed(self, records: Iterable[tuple[Key, WorkflowRecord]]) -> None:
        """A batch committed these records: keep them, dropping the least recently used."""
        if not self.keep:
            return
        kept = self._records
        for key, record in records:
            kept[key] = record
            kept.move_to_end(key)
        while len(kept) > self.keep:
            kept.popitem(last=False)

    def release(self) -> int:
        """Drop the kept records, how many: a burst ended, and the next events of the
        workflows that wait come minutes or days apart, each one RocksDB read away.
        Dropping is always safe (the tables hold what was committed); the watchdog does
        it when it trims the heap, for the memory the default keep holds in an idle
        tracker (docs/design/tuning-measurements.md)."""
        count = len(self._records)
        self._records.clear()
        return count

    # -- parked events -------------------------------------------------------------

    def parked_in(self, partition: int) -> set[str] | None:
        """The workflows of ``partition`` that may have parked events (None: not known
        yet; ``know_parked`` what the tables hold)."""
        return self._parked.get(partition)

    def know_parked(self, partition: int, workflows: Iterable[str]) -> set[str]:
        """The workflows with parked events in ``partition``'s table, as first read."""
        known = self._parked[partition] = set(workflows)
        return known

    def unparked(self, gone: Iterable[Key]) -> None:
        """A committed batch left these workflows without parked events."""
        for partition, workflow_id in gone:
            self._parked.get(partition, set()).discard(workflow_id)

    # -- -----------------------------------------------------------------------------

    def forget(self) -> None:
        """Drop everything: the partitions changed hands, or a batch failed."""
        self._records.clear()
        self._parked.clear()
