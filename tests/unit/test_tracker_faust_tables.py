"""``FaustTables`` over RocksDB opened as faust opens it (raw mode): scans stop at the bound."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import rocksdict

from sagalog.services.tracker.fencing import PartitionsFenced
from sagalog.services.tracker.store import FaustTables, Table


class _Table:
    """The parts of a faust table ``FaustTables`` touches."""

    def __init__(self, db: Any) -> None:
        self.persisted: dict[Any, int] = {}
        self.data = SimpleNamespace(
            _dbs={0: db},
            _db_for_partition=lambda p: db,
            set_persisted_offset=self.persisted.__setitem__,
            offset_key=b"__faust\0offset__",
        )
        self.changelog_topic = SimpleNamespace(get_topic_name=lambda: "app-timers-changelog")


class _Producer:
    """Acknowledges every record at commit, numbering offsets per partition."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, bytes, bytes | None]] = []
        self._waiting: list[Any] = []

    def produce_raw(
        self, topic: str, partition: int, key: bytes, value: bytes | None, on_delivery: Any
    ) -> None:
        self.sent.append((topic, partition, key, value))
        offset = len(self.sent) - 1
        message = SimpleNamespace(offset=lambda: offset, topic=lambda: topic)
        self._waiting.append(lambda: on_delivery(None, message))

    async def commit(self) -> None:
        for deliver in self._waiting:
            deliver()
        self._waiting.clear()


def test_a_scan_reads_only_keys_below_the_upper_bound_and_writes_go_to_the_changelog(
    tmp_path: Path,
) -> None:
    db = rocksdict.Rdict(str(tmp_path / "t"), options=rocksdict.Options(raw_mode=True))
    table = _Table(db)
    producer = _Producer()
    tables = FaustTables({Table.TIMERS: table}, producer)
    for i in range(1000):
        tables.put(Table.TIMERS, 0, b"%015d|wf-%d" % (i, i), b"")
    tables.delete(Table.TIMERS, 0, b"%015d|wf-%d" % (3, 3))
    # Nothing is stored, nor an offset recorded, before the transaction committed.
    assert tables.scan(Table.TIMERS, 0, b"", b"%015d" % 1000, limit=5) == []
    assert table.persisted == {}
    asyncio.run(tables.sync())

    due = tables.scan(Table.TIMERS, 0, b"", b"%015d" % 10, limit=100)

    assert [k for k, _ in due] == [b"%015d|wf-%d" % (i, i) for i in (0, 1, 2, 4, 5, 6, 7, 8, 9)]
    assert tables.scan(Table.TIMERS, 0, b"", b"%015d" % 1000, limit=5)[-1][0].startswith(b"0" * 14)
    assert len(producer.sent) == 1001 and producer.sent[-1][3] is None
    assert producer.sent[0][:2] == ("app-timers-changelog", 0)
    assert tables.get(Table.TIMERS, 1, b"x") is None  # a partition this worker does not hold
    assert list(table.persisted.values()) == [1000]
    db.close()


def test_a_batch_whose_transaction_failed_leaves_nothing_in_the_local_tables(
    tmp_path: Path,
) -> None:
    """A fenced worker's batch was aborted on the broker: RocksDB must not keep it either,
    or the worker would hold writes nobody can restore when it gets the partition back."""
    db = rocksdict.Rdict(str(tmp_path / "t"), options=rocksdict.Options(raw_mode=True))
    table = _Table(db)
    producer = _Producer()
    tables = FaustTables({Table.TIMERS: table}, producer)
    tables.put(Table.TIMERS, 0, b"kept", b"")
    asyncio.run(tables.sync())

    async def fenced() -> None:
        raise PartitionsFenced("partitions [0] were taken over")

    producer.commit = fenced  # type: ignore[method-assign]
    tables.put(Table.TIMERS, 0, b"aborted", b"")
    tables.delete(Table.TIMERS, 0, b"kept")
    with pytest.raises(PartitionsFenced):
        asyncio.run(tables.sync())

    assert [k for k, _ in tables.scan(Table.TIMERS, 0, b"", b"~", limit=10)] == [b"kept"]
    assert list(table.persisted.values()) == [0]
    db.close()
