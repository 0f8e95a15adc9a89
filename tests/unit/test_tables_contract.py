"""The ``Tables`` contract, run against every implementation the processor is given.

The processor decides against ``MemoryTables`` in the unit tests and what-if runs,
against a rebuild's RocksDB in a replay, and against faust's RocksDB tables in
production; a difference between them is a difference between what the tests prove
and what runs. So one suite states what the processor relies on
(``sagalog.tracker.processor``, ``tables.Overlay``) and each implementation must
pass it, as eventsourcing's and quix-streams' stores each pass their backend suite:

- a key never written reads ``None`` and is in no scan; an empty value is a value;
- tables and partitions are independent key spaces;
- a scan is the half-open range ``[lower, upper)`` in unsigned byte order, at most
  ``limit`` rows, the first ones;
- what a batch wrote is read back by the next batch (after ``sync`` and, for a
  rebuild, the commit the rebuild makes at every chunk's end), and only what it wrote:
  an implementation's own bookkeeping keys stay out of reads and scans.

Writes are read back only after the batch's end: inside a batch the processor
reads through its ``Overlay``, and a rebuild stages writes until its commit.

The faust implementation is built for real, as the service builds it
(``sagalog.services.tracker.store.build_tables``): faust tables on RocksDB, no broker needed for
their storage; the changelog producer is a stand-in that acknowledges at commit (what
reaches Kafka is the integration suites' business).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import faust
import pytest

from sagalog.replay.store import RebuildStore
from sagalog.rocksdb_options import MemoryBudget
from sagalog.services.tracker import faust_internals
from sagalog.services.tracker.store import FaustTables, build_tables
from sagalog.tracker.tables import (
    MemoryTables,
    Overlay,
    Table,
    Tables,
    parked_prefix,
    prefix_end,
)

PARTITIONS = 3


@dataclass
class Implementation:
    """One ``Tables`` implementation and how it ends a batch."""

    tables: Tables
    end: Callable[[], None]

    def end_batch(self) -> None:
        asyncio.run(self.tables.sync())
        self.end()


class _AckingProducer:
    """The changelog producer's stand-in: every record acknowledged at commit, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, bytes, bytes | None]] = []
        self._waiting: list[Callable[[], None]] = []

    def produce_raw(
        self, topic: str, partition: int, key: bytes, value: bytes | None, on_delivery: Any
    ) -> None:
        offset = len(self.sent)
        self.sent.append((topic, partition, key, value))
        message = SimpleNamespace(offset=lambda: offset, topic=lambda: topic)
        self._waiting.append(lambda: on_delivery(None, message))

    async def commit(self) -> None:
        waiting, self._waiting = self._waiting, []
        for deliver in waiting:
            deliver()


def _memory(tmp_path: Path) -> Iterator[Implementation]:
    yield Implementation(MemoryTables(), end=lambda: None)


def _rebuild(tmp_path: Path) -> Iterator[Implementation]:
    with RebuildStore.open(tmp_path / "rebuild", meta={"kind": "contract"}) as store:
        yield Implementation(store, end=lambda: store.commit({}))


def _faust(tmp_path: Path) -> Iterator[Implementation]:
    app = faust.App(
        "contract",
        broker="kafka://127.0.0.1:1",  # never contacted: table storage needs no broker
        store="rocksdb://",
        datadir=str(tmp_path / "faust"),
        web_enabled=False,
    )
    tables = build_tables(
        app,
        partitions=PARTITIONS,
        budget=MemoryBudget(cache_mb=4, memtables_mb=8),
        topic_configs={},
    )
    # faust opens a partition's database when the partition is assigned; here, all.
    for table in tables.values():
        for partition in range(PARTITIONS):
            faust_internals.db_for_write(table, partition)
    yield Implementation(FaustTables(tables, _AckingProducer()), end=lambda: None)


@pytest.fixture(params=[_memory, _rebuild, _faust], ids=["memory", "rebuild", "faust"])
def impl(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Implementation]:
    yield from request.param(tmp_path)


def _write(impl: Implementation, *rows: tuple[Table, int, bytes, bytes | None]) -> None:
    """One batch: put each row (``None`` deletes), then end the batch."""
    for table, partition, key, value in rows:
        if value is None:
            impl.tables.delete(table, partition, key)
        else:
            impl.tables.put(table, partition, key, value)
    impl.end_batch()


EVERYTHING = (b"", b"\xff" * 64)
"""A range holding every key a test writes (none is 64 bytes of 0xFF)."""


# -- get, put, delete ------------------------------------------------------------------


def test_a_key_never_written_reads_none_and_no_scan_holds_it(impl: Implementation) -> None:
    for table in Table:
        for partition in range(PARTITIONS):
            assert impl.tables.get(table, partition, b"wf-1") is None
            assert impl.tables.scan(table, partition, *EVERYTHING, 100) == []


def test_what_a_batch_wrote_the_next_batch_reads_as_bytes(impl: Implementation) -> None:
    _write(impl, (Table.RECORDS, 1, b"wf-1", b'{"state":"running"}'))
    value = impl.tables.get(Table.RECORDS, 1, b"wf-1")
    assert value == b'{"state":"running"}' and type(value) is bytes


def test_an_empty_value_is_a_value_not_an_absence(impl: Implementation) -> None:
    """Timers are stored with empty values: reading one as missing would lose it."""
    _write(impl, (Table.TIMERS, 0, b"000000000000042|wf-1|step", b""))
    assert impl.tables.get(Table.TIMERS, 0, b"000000000000042|wf-1|step") == b""
    assert impl.tables.scan(Table.TIMERS, 0, *EVERYTHING, 10) == [
        (b"000000000000042|wf-1|step", b"")
    ]


def test_a_put_replaces_and_a_delete_removes(impl: Implementation) -> None:
    _write(impl, (Table.RECORDS, 0, b"wf-1", b"v1"), (Table.RECORDS, 0, b"wf-2", b"v1"))
    _write(impl, (Table.RECORDS, 0, b"wf-1", b"v2"), (Table.RECORDS, 0, b"wf-2", None))
    assert impl.tables.get(Table.RECORDS, 0, b"wf-1") == b"v2"
    assert impl.tables.get(Table.RECORDS, 0, b"wf-2") is None
    assert impl.tables.scan(Table.RECORDS, 0, *EVERYTHING, 10) == [(b"wf-1", b"v2")]


def test_deleting_a_key_that_is_not_there_changes_nothing(impl: Implementation) -> None:
    """A timer cancelled twice (once fired, once by the step's completion) must not fail."""
    _write(impl, (Table.TIMERS, 0, b"a", b""))
    _write(impl, (Table.TIMERS, 0, b"never-written", None), (Table.TIMERS, 1, b"a", None))
    assert impl.tables.scan(Table.TIMERS, 0, *EVERYTHING, 10) == [(b"a", b"")]
    assert impl.tables.scan(Table.TIMERS, 1, *EVERYTHING, 10) == []


def test_tables_and_partitions_are_separate_key_spaces(impl: Implementation) -> None:
    rows = [(table, p, b"k", f"{table}/{p}".encode()) for table in Table for p in range(PARTITIONS)]
    _write(impl, *rows)
    for table, partition, key, value in rows:
        assert impl.tables.get(table, partition, key) == value
        assert impl.tables.scan(table, partition, *EVERYTHING, 10) == [(key, value)]
    _write(impl, (Table.PARKED, 1, b"k", None))
    assert impl.tables.get(Table.PARKED, 1, b"k") is None
    assert impl.tables.get(Table.PARKED, 0, b"k") == b"parked/0"
    assert impl.tables.get(Table.ADMISSION, 1, b"k") == b"admission/1"


# -- scans -------------------------------------------------------------------------------


def test_a_scan_is_half_open_in_unsigned_byte_order(impl: Implementation) -> None:
    keys = [b"a", b"ab", b"b", b"b\x00", b"b\x7f", b"b\x80", b"b\xff", b"c", b"\xff"]
    _write(impl, *[(Table.ADMISSION, 2, key, key.hex().encode()) for key in reversed(keys)])
    assert [k for k, _ in impl.tables.scan(Table.ADMISSION, 2, *EVERYTHING, 100)] == keys
    assert [k for k, _ in impl.tables.scan(Table.ADMISSION, 2, b"b", b"c", 100)] == [
        b"b",
        b"b\x00",
        b"b\x7f",
        b"b\x80",
        b"b\xff",
    ]  # lower included, upper excluded
    assert impl.tables.scan(Table.ADMISSION, 2, b"ab", b"ab", 100) == []
    assert impl.tables.scan(Table.ADMISSION, 2, b"c", b"b", 100) == []
    rows = impl.tables.scan(Table.ADMISSION, 2, b"b\x7f", b"b\x80", 100)
    assert rows == [(b"b\x7f", b"627f")] and all(type(v) is bytes for _, v in rows)


def test_a_scan_returns_the_first_limit_rows_in_key_order(impl: Implementation) -> None:
    """Due timers are found oldest first, ``timers_per_tick`` at a time."""
    due = [b"%015d|wf-%d" % (at, at) for at in range(0, 3000, 7)]
    _write(impl, *[(Table.TIMERS, 0, key, b"") for key in reversed(due)])
    assert [k for k, _ in impl.tables.scan(Table.TIMERS, 0, b"", b"%015d" % 3000, 5)] == due[:5]
    assert impl.tables.scan(Table.TIMERS, 0, b"", b"%015d" % 3000, 1) == [(due[0], b"")]
    upto = [k for k, _ in impl.tables.scan(Table.TIMERS, 0, b"", b"%015d" % 100, 1000)]
    assert upto == [k for k in due if k < b"%015d" % 100]


def test_a_prefix_scan_finds_one_workflows_parked_events_and_no_other(
    impl: Implementation,
) -> None:
    """``a`` and ``a|b`` must not share a prefix, nor ids ending in 0xFF a bound."""
    workflows = ["a", "a|b", "ab", "wf\xff", "wf\xff\xff"]
    _write(
        impl,
        *[
            (Table.PARKED, 0, parked_prefix(w) + b"ev-%d" % i, w.encode())
            for w in workflows
            for i in range(3)
        ],
    )
    for workflow in workflows:
        prefix = parked_prefix(workflow)
        rows = impl.tables.scan(Table.PARKED, 0, prefix, prefix_end(prefix), 10_000)
        assert [k for k, _ in rows] == [prefix + b"ev-%d" % i for i in range(3)]
        assert {v for _, v in rows} == {workflow.encode()}


def test_only_what_was_written_is_read_back_never_the_stores_own_keys(
    impl: Implementation,
) -> None:
    """faust keeps each partition's changelog offset beside the table's keys, written
    at ``sync``; the processor's scans must not see it (nor any other bookkeeping)."""
    written = {b"k%03d" % i: b"v%03d" % i for i in range(50)}
    for _ in range(2):  # two batches: the second with the first's bookkeeping in place
        _write(impl, *[(Table.ADMISSION, 0, k, v) for k, v in written.items()])
    for limit in (1, 49, 50, 51, 10_000):
        rows = impl.tables.scan(Table.ADMISSION, 0, *EVERYTHING, limit)
        assert rows == sorted(written.items())[:limit]


# -- the batch as the processor runs it ---------------------------------------------------


def test_a_batch_written_back_through_the_overlay_is_what_the_next_batch_reads(
    impl: Implementation,
) -> None:
    _write(impl, (Table.TIMERS, 0, b"t1", b""), (Table.TIMERS, 0, b"t2", b""))
    overlay = Overlay(impl.tables)
    overlay.delete(Table.TIMERS, 0, b"t1")
    overlay.put(Table.TIMERS, 0, b"t3", b"")
    overlay.put(Table.RECORDS, 0, b"wf-1", b"record")
    overlay.delete(Table.RECORDS, 0, b"wf-never")
    assert overlay.write_back() == 3  # the delete of a key never stored costs nothing
    impl.end_batch()
    following = Overlay(impl.tables)
    assert following.scan(Table.TIMERS, 0, *EVERYTHING, 10) == [(b"t2", b""), (b"t3", b"")]
    assert following.get(Table.RECORDS, 0, b"wf-1") == b"record"


def test_sync_with_nothing_written_returns(impl: Implementation) -> None:
    impl.end_batch()
    impl.end_batch()
    assert impl.tables.get(Table.RECORDS, 0, b"wf-1") is None
