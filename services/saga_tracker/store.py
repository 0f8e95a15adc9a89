"""The tracker's tables, addressed by partition, and the write-back overlay of one batch.

faust keeps one RocksDB per table partition and a changelog topic per table; its
``Table`` API picks the partition from the event being processed (a context
variable). The tracker decides a whole batch of events of several partitions at
once and must control *when* its writes reach RocksDB (after the events they cause
are acknowledged, see ``processor``), so it addresses partitions explicitly:

- ``FaustTables`` reads a partition's RocksDB directly and writes through the same
  two steps faust takes (``db.put`` plus a changelog record), so faust's restore,
  standby replicas and offset bookkeeping work unchanged;
- ``MemoryTables`` is the same contract over dicts, for unit tests;
- ``Overlay`` buffers one batch's writes, answers reads from them first, and writes
  them back in a safe order: timers, parked events and admission counters first,
  workflow records last (a record is the proof that its input was handled).

Keys and values are bytes. Scans are half-open ranges ``[lower, upper)`` in byte
order, which is what makes timers cheap to find (see ``sagalog.tracker.timers``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import rocksdict
from faust.types import TP

from sagalog.errors import SagalogError


class Table(enum.StrEnum):
    """The tracker's tables (faust names them ``<app id>-<name>-changelog``)."""

    RECORDS = "records"
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


class FaustTables:
    """``Tables`` over faust RocksDB tables (``key_type=bytes``, ``value_type=bytes``).

    Reads go to the partition's own RocksDB; a partition this worker does not hold
    (not assigned, or not restored yet) reads as empty and is never opened here.
    A write puts the value in RocksDB and sends the same bytes to the table's
    changelog partition, as faust's ``Table.__setitem__`` does, but through the
    tracker's librdkafka producer instead of faust's: faust builds several Python
    objects and futures per changelog record, which profiling showed to be a tenth
    of the tracker's time. ``sync`` waits for the acknowledgements and then records
    the changelog offsets in each partition's RocksDB (``set_persisted_offset``),
    the bookkeeping faust's own send callback does, so restore and standby replicas
    work unchanged.
    """

    def __init__(self, tables: dict[Table, Any], producer: ChangelogProducer) -> None:
        self.tables = tables
        self.producer = producer
        self.topics = {table: tables[table].changelog_topic.get_topic_name() for table in tables}
        self._acked: dict[tuple[Table, int], int] = {}
        self._errors: list[str] = []

    def _db(self, table: Table, partition: int) -> Any:
        return self.tables[table].data._dbs.get(partition)

    def get(self, table: Table, partition: int, key: bytes) -> bytes | None:
        db = self._db(table, partition)
        if db is None:
            return None
        value = db.get(key)
        return value if value is None or isinstance(value, bytes) else bytes(value)

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None:
        self.tables[table].data._db_for_partition(partition).put(key, value)
        self._send(table, partition, key, value)

    def delete(self, table: Table, partition: int, key: bytes) -> None:
        self.tables[table].data._db_for_partition(partition).delete(key)
        self._send(table, partition, key, None)

    def scan(
        self, table: Table, partition: int, lower: bytes, upper: bytes, limit: int
    ) -> list[tuple[bytes, bytes]]:
        db = self._db(table, partition)
        if db is None:
            return []
        options = rocksdict.ReadOptions()
        options.set_iterate_upper_bound(upper)
        found = []
        for key, value in db.items(from_key=lower, read_opt=options):
            found.append((key, value))
            if len(found) >= limit:
                break
        return found

    async def sync(self) -> None:
        """Wait for the changelog acks, then persist the offsets faust restores from.

        Raises:
            SagalogError: a changelog record was refused; the batch must not be committed.
        """
        await self.producer.flush()
        if self._errors:
            first, count = self._errors[0], len(self._errors)
            self._errors.clear()
            raise SagalogError(f"Kafka refused {count} changelog record(s); first: {first}")
        acked, self._acked = self._acked, {}
        for (table, partition), offset in acked.items():
            store = self.tables[table].data
            if partition in store._dbs:  # still ours: not revoked meanwhile
                store.set_persisted_offset(TP(self.topics[table], partition), offset)

    def _send(self, table: Table, partition: int, key: bytes, value: bytes | None) -> None:
        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                self._errors.append(f"{message.topic()}: {error.str()}")
                return
            slot = (table, partition)
            self._acked[slot] = max(self._acked.get(slot, -1), message.offset())

        self.producer.produce_raw(self.topics[table], partition, key, value, delivered)


class ChangelogProducer(Protocol):
    def produce_raw(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes | None,
        on_delivery: Callable[[Any, Any], None],
    ) -> None: ...

    async def flush(self) -> None: ...


_DELETED = None


class Overlay:
    """One batch's pending writes over ``Tables``: read-your-writes now, written back later."""

    def __init__(self, base: Tables) -> None:
        self.base = base
        self.pending: dict[Table, dict[tuple[int, bytes], bytes | None]] = {t: {} for t in Table}

    def get(self, table: Table, partition: int, key: bytes) -> bytes | None:
        pending = self.pending[table]
        if (partition, key) in pending:
            return pending[(partition, key)]
        return self.base.get(table, partition, key)

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None:
        self.pending[table][(partition, key)] = value

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
            if value is _DELETED:
                merged.pop(key, None)
            else:
                merged[key] = value
        return sorted(merged.items())[:limit]

    def write_back(self) -> int:
        """Write every pending change to the base, records last; how many were written."""
        written = 0
        for table in WRITE_ORDER:
            for (partition, key), value in self.pending[table].items():
                if value is _DELETED:
                    self.base.delete(table, partition, key)
                else:
                    self.base.put(table, partition, key, value)
                written += 1
            self.pending[table].clear()
        return written

    def __iter__(self) -> Iterator[Table]:
        return iter(self.pending)
