"""The tracker's tables, addressed by partition, and the write-back overlay of one batch.

The processor (``sagalog.tracker.processor``) decides a whole batch of events of
several partitions at once and must control *when* its writes reach storage (after
the events they cause are acknowledged), so it addresses partitions explicitly,
through the ``Tables`` contract:

- ``sagalog.services.tracker.store.FaustTables`` is the service's: faust's RocksDB tables and
  their changelogs;
- ``sagalog.replay.store.RebuildStore`` is a replay's: one fresh RocksDB holding the
  rebuilt tables with the offsets they were rebuilt up to;
- ``MemoryTables`` is the same contract over dicts, for tests and what-if runs;
- ``Overlay`` buffers one batch's writes, answers reads from them first, and writes
  them back in a safe order: timers, parked events and admission counters first,
  workflow records last (a record is the proof that its input was handled).

Keys and values are bytes. Scans are half-open ranges ``[lower, upper)`` in byte
order, which is what makes timers cheap to find (see ``sagalog.tracker.timers``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from typing import Protocol

from sagalog.topic_names import RECORDS_TABLE


class Table(enum.StrEnum):
    """The tracker's tables (faust names them ``<app id>-<name>-changelog``)."""

    RECORDS = RECORDS_TABLE
    """workflow id -> stored ``WorkflowRecord`` (JSON)."""
    TIMERS = "timers"
    """timer key (due time first) -> empty."""
    PARKED = "parked"
    """``parked_prefix(workflow) + event id`` -> the held ``TrackedEvent`` (JSON)."""
    ADMISSION = "admission"
    """``slot|<flow>|<workflow>`` while active; ``queue|<flow>|<queue key>`` -> workflow id."""


WRITE_ORDER = (Table.TIMERS, Table.PARKED, Table.ADMISSION, Table.RECORDS)
"""Records last: a stored record says its input is done, so everything else comes first."""


class Tables(Protocol):
    def get(self, table: Table, partition: int, key: bytes) -> bytes | None: ...

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None: ...

    def delete(self, table: Table, partition: int, key: bytes) -> None: ...

    def scan(
        self, table: Table, partition: int, lower: bytes, upper: bytes, limit: int
    ) -> list[tuple[bytes, bytes]]: ...

    async def sync(self) -> None:
        """Wait until every write is durable beyond this process (its changelog acknowledged)."""


def parked_prefix(workflow_id: str) -> bytes:
    """Length-prefixed, so ``a`` and ``a|b`` never share a prefix."""
    raw = workflow_id.encode()
    return b"%06d%s|" % (len(raw), raw)


def parked_workflow(key: bytes) -> str:
    """The workflow id of a parked event's key (``parked_prefix`` read back)."""
    length = int(key[:6])
    return key[6 : 6 + length].decode()


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``.

    Trailing 0xFF bytes cannot be incremented: drop them and increment the byte before.
    """
    stem = prefix.rstrip(b"\xff")
    if not stem:
        raise ValueError(f"prefix {prefix!r} has no upper bound: it is all 0xFF bytes")
    return stem[:-1] + bytes([stem[-1] + 1])


class MemoryTables:
    """``Tables`` over dicts: the contract without Kafka, for the processor's unit tests."""

    def __init__(self) -> None:
        self.data: dict[tuple[Table, int], dict[bytes, bytes]] = {}
        self.writes = 0

    def _part(self, table: Table, partition: int) -> dict[bytes, bytes]:
        return self.data.setdefault((table, partition), {})

    def get(self, table: Table, partition: int, key: bytes) -> bytes | None:
        return self._part(table, partition).get(key)

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None:
        self.writes += 1
        self._part(table, partition)[key] = value

    def delete(self, table: Table, partition: int, key: bytes) -> None:
        self.writes += 1
        self._part(table, partition).pop(key, None)

    def scan(
        self, table: Table, partition: int, lower: bytes, upper: bytes, limit: int
    ) -> list[tuple[bytes, bytes]]:
        part = self._part(table, partition)
        return sorted((k, v) for k, v in part.items() if lower <= k < upper)[:limit]

    async def sync(self) -> None:
        return None


_DELETED = None

Encode = Callable[[], bytes]
"""A value encoded only when it is read or written back (``Overlay.put_deferred``)."""


def _value(pending: bytes | Encode | None) -> bytes | None:
    return pending() if callable(pending) else pending


class Overlay:
    """One batch's pending writes over ``Tables``: read-your-writes now, written back later."""

    def __init__(self, base: Tables) -> None:
        self.base = base
        self.pending: dict[Table, dict[tuple[int, bytes], bytes | Encode | None]] = {
            t: {} for t in Table
        }

    def get(self, table: Table, partition: int, key: bytes) -> bytes | None:
        pending = self.pending[table]
        if (partition, key) in pending:
            return _value(pending[(partition, key)])
        return self.base.get(table, partition, key)

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None:
        self.pending[table][(partition, key)] = value

    def put_deferred(self, table: Table, partition: int, key: bytes, encode: Encode) -> None:
        """Put the value ``encode`` returns, calling it only when the value is read or
        written back: a key changed several times in one batch (a workflow's record, by
        each of its events) is encoded once and written once."""
        self.pending[table][(partition, key)] = encode

    def has_pending(self, table: Table, partition: int, key: bytes) -> bool:
        """Whether this batch wrote or deleted ``key``."""
        return (partition, key) in self.pending[table]

    def delete(self, table: Table, partition: int, key: bytes) -> None:
        """Delete ``key``; a key that is not stored (or only put in this batch) costs nothing.

        A step timeout set and cancelled within one batch, or a timer cancelled after
        it fired, would otherwise each leave a tombstone in the changelog.
        """
        pending = self.pending[table]
        if self.base.get(table, partition, key) is None:
            pending.pop((partition, key), None)
        else:
            pending[(partition, key)] = _DELETED

    def scan(
        self, table: Table, partition: int, lower: bytes, upper: bytes, limit: int
    ) -> list[tuple[bytes, bytes]]:
        """The base's keys in range, with this batch's writes applied, in key order."""
        pending = {
            key: value
            for (p, key), value in self.pending[table].items()
            if p == partition and lower <= key < upper
        }
        deleted = sum(1 for v in pending.values() if v is _DELETED)
        merged = dict(self.base.scan(table, partition, lower, upper, limit + deleted))
        for key, value in pending.items():
            if value is None:  # deleted
                merged.pop(key, None)
            else:
                merged[key] = value() if callable(value) else value
        return sorted(merged.items())[:limit]

    def write_back(self) -> int:
        """Write every pending change to the base, records last; how many were written."""
        written = 0
        for table in WRITE_ORDER:
            for (partition, key), pending in self.pending[table].items():
                value = _value(pending)
                if value is _DELETED:
                    self.base.delete(table, partition, key)
                else:
                    self.base.put(table, partition, key, value)
                written += 1
            self.pending[table].clear()
        return written

    def __iter__(self) -> Iterator[Table]:
        return iter(self.pending)
