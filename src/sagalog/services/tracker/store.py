"""faust's RocksDB tables behind the tracker's ``Tables`` contract.

faust keeps one RocksDB per table partition and a changelog topic per table; its
``Table`` API picks the partition from the event being processed (a context
variable). The tracker's processor addresses partitions explicitly instead (see
``sagalog.tracker.tables``, where the contract, ``MemoryTables`` and the batch
``Overlay`` live, re-exported here): ``FaustTables`` reads a partition's RocksDB
directly and writes through the same two steps faust takes (``db.put`` plus a
changelog record), so faust's restore, standby replicas and offset bookkeeping work
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import rocksdict
from faust.types import TP

from sagalog.disk_space import await_space
from sagalog.errors import SagalogError
from sagalog.health import HealthBook
from sagalog.rocksdb_options import MemoryBudget
from sagalog.services.tracker import faust_internals
from sagalog.services.tracker.rocks import ROCKSDB_OPTIONS, BudgetedRocksDBOptions
from sagalog.tracker.tables import (
    WRITE_ORDER,
    MemoryTables,
    Overlay,
    Table,
    Tables,
    parked_prefix,
    prefix_end,
)

__all__ = [
    "WRITE_ORDER",
    "ChangelogProducer",
    "FaustTables",
    "MemoryTables",
    "Overlay",
    "Table",
    "Tables",
    "build_tables",
    "parked_prefix",
    "prefix_end",
]


def build_tables(
    app: Any, *, partitions: int, budget: MemoryBudget, topic_configs: dict[str, Any]
) -> dict[Table, Any]:
    """The tracker's faust tables: raw bytes both ways, every RocksDB under ``budget``.

    Args:
        app: the faust app (no broker is needed to build them or use their storage).
        partitions: the workflow topics' count; a table partition per input partition.
        budget: the block cache and memtable limit all the databases share (``rocks``).
        topic_configs: the changelog topics' configuration (the cluster profile's).
    """
    tables = {
        table: app.Table(
            table.value,
            partitions=partitions,
            key_type=bytes,
            value_type=bytes,
            options=dict(ROCKSDB_OPTIONS),
            extra_topic_configs=topic_configs,
        )
        for table in Table
    }
    for faust_table in tables.values():
        faust_internals.set_rocksdb_options(
            faust_table, BudgetedRocksDBOptions(budget, **ROCKSDB_OPTIONS)
        )
    return tables


class FaustTables:
    """``Tables`` over faust RocksDB tables (``key_type=bytes``, ``value_type=bytes``).

    Reads go to the partition's own RocksDB; a partition this worker does not hold
    (not assigned, or not restored yet) reads as empty and is never opened here.
    A write sends the bytes to the table's changelog partition, as faust's
    ``Table.__setitem__`` does, but through the tracker's librdkafka producer instead
    of faust's (faust builds several Python objects and futures per changelog record,
    which profiling showed to be a tenth of the tracker's time), inside the
    partition's transaction (``sink``, ``fencing``). The RocksDB write waits for
    ``sync``: only once the transaction committed is the value put, and the changelog
    offset recorded (``set_persisted_offset``, the bookkeeping faust's own send
    callback does). A batch that was aborted (a fenced worker's) thus leaves no trace
    in the local tables either, and restore and standby replicas work unchanged.
    A full disk under the tables is waited out in ``sync``: the batch committed, so
    the worker holds it until its local copy is stored, and takes no other.
    """

    def __init__(
        self,
        tables: dict[Table, Any],
        producer: ChangelogProducer,
        *,
        directory: Path | None = None,
        health: HealthBook | None = None,
    ) -> None:
        """Args:
        directory: where the tables' RocksDBs live; a full disk there is waited out
            (``disk_space``), named in ``health``.
        """
        self.tables = tables
        self.producer = producer
        self.directory = directory
        self.health = health
        self._reopening: dict[Table, set[int]] | None = None
        self.topics = {table: tables[table].changelog_topic.get_topic_name() for table in tables}
        self._acked: dict[tuple[Table, int], int] = {}
        self._staged: list[tuple[Table, int, bytes, bytes | None]] = []
        self._errors: list[str] = []

    def _db(self, table: Table, partition: int) -> Any:
        return faust_internals.open_db(self.tables[table], partition)

    def get(self, table: Table, partition: int, key: bytes) -> bytes | None:
        db = self._db(table, partition)
        if db is None:
            return None
        value = db.get(key)
        return value if value is None or isinstance(value, bytes) else bytes(value)

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None:
        self._staged.append((table, partition, key, value))
        self._send(table, partition, key, value)

    def delete(self, table: Table, partition: int, key: bytes) -> None:
        self._staged.append((table, partition, key, None))
        self._send(table, partition, key, None)

    def scan(
        self, table: Table, partition: int, lower: bytes, upper: bytes, limit: int
    ) -> list[tuple[bytes, bytes]]:
        db = self._db(table, partition)
        if db is None:
            return []
        options = rocksdict.ReadOptions()
        options.set_iterate_upper_bound(upper)
        own = faust_internals.offset_key(self.tables[table])
        found = []
        for key, value in db.items(from_key=lower, read_opt=options):
            if key == own:  # faust's, beside the table's keys; its own iteration skips it
                continue
            found.append((key, value))
            if len(found) >= limit:
                break
        return found

    async def sync(self) -> None:
        """Commit the batch's transactions, then store its writes and persist the
        changelog offsets faust restores from.

        Raises:
            SagalogError: the transactions did not commit (``fencing``) or a changelog
                record was refused; nothing of the batch is stored.
        """
        staged, self._staged = self._staged, []
        try:
            await self.producer.commit()
        except BaseException:
            self._acked.clear()
            self._errors.clear()
            raise
        if self._errors:
            first, count = self._errors[0], len(self._errors)
            self._errors.clear()
            self._acked.clear()
            raise SagalogError(f"Kafka refused {count} changelog record(s); first: {first}")
        acked, self._acked = self._acked, {}

        def store() -> None:
            for table, partition, key, value in staged:
                db = faust_internals.db_for_write(self.tables[table], partition)
                if value is None:
                    db.delete(key)
                else:
                    db.put(key, value)
            for (table, partition), offset in acked.items():
                tp = TP(self.topics[table], partition)
                faust_internals.persist_offset(self.tables[table], tp, offset)

        if self.directory is None:
            store()
            return
        # The batch committed: its records are in the changelogs, and only the local
        # copy waits for space (puts of the same values, so repeating them is harmless).
        await await_space(store, directory=self.directory, reopen=self._reopen, health=self.health)

    def _reopen(self) -> None:
        """Close and reopen every table partition's RocksDB (see ``disk_space``): all
        of them, as a partition not open reads as not held. The set is taken before
        the first attempt, so an open refused for want of space is tried again."""
        if self._reopening is None:
            self._reopening = {
                table: faust_internals.open_partitions(faust_table)
                for table, faust_table in self.tables.items()
            }
        for table, partitions in self._reopening.items():
            faust_internals.reopen_dbs(self.tables[table], partitions)
        self._reopening = None

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

    async def commit(self) -> None: ...
