"""An agent's store on a real full disk (a small tmpfs, ``disks.SmallDisk``; root
only): a write waits while the disk is full, the health book names the directory,
and the write goes through, nothing lost, once the space returns."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import rocksdict

import external_tools
from sagalog.agents.state_store import StateStore
from sagalog.disk_space import disk_problems
from sagalog.health import Health, HealthBook
from sagalog.position import RecordPosition
from sagalog.services.tracker.store import FaustTables, Table

from .disks import SmallDisk, mounted


@pytest.fixture
def disk(tmp_path: Path) -> SmallDisk:
    external_tools.require_root("mounting a size-limited tmpfs")
    with SmallDisk(f"test-{tmp_path.name[-16:]}", tmp_path / "agent", size_mb=16) as small:
        yield small  # type: ignore[misc]
    assert small.source not in {source for source, _ in mounted()}


def test_a_store_write_waits_out_a_full_disk_naming_it_and_loses_nothing(
    disk: SmallDisk,
) -> None:
    store = StateStore(disk.path / "store")
    book = HealthBook()
    book.ready()
    store.health = book
    store.record_effect("before", {"id": 1})
    assert disk.fill() > 0
    done = threading.Event()

    def write() -> None:
        for n in range(200):
            store.fold(
                workflow_id=f"wf-{n}",
                event_id=f"ev-{n}",
                event_type="procurement.v1.RequestSubmitted",
                source="test",
                payload=b"x" * 1000,
                position=RecordPosition("t", 0, n),
            )
            store.set_checkpoint("t", 0, n + 1)
        store.flush()
        store.record_effect("after", {"id": 2})
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert _wait(lambda: book.status is Health.DEGRADED), "the full disk was never reported"
    [problem] = disk_problems(book)
    assert str(store.path) in problem and "no space left on device" in problem
    assert not done.wait(3), "a write went through on a full disk"
    disk.free()
    assert done.wait(60), "the write did not resume within 60 s of freeing the disk"
    assert book.status is Health.OK
    store.close()
    reopened = StateStore(disk.path / "store")
    try:
        assert reopened.checkpoint("t", 0) == 200
        assert reopened.context("wf-199").seen("ev-199")
        assert reopened.effect_result("before") == {"result": {"id": 1}}
        assert reopened.effect_result("after") == {"result": {"id": 2}}
    finally:
        reopened.close()


def _wait(condition: object, timeout: float = 30) -> bool:
    event = threading.Event()
    for _ in range(int(timeout * 10)):
        if condition():  # type: ignore[operator]
            return True
        event.wait(0.1)
    return False


class _FaustStore:
    """The parts of a faust RocksDB store ``FaustTables`` touches: it opens a
    partition's database on first write, as faust's ``_db_for_partition`` does."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._dbs: dict[int, rocksdict.Rdict] = {}
        self.persisted: dict[Any, int] = {}
        self.set_persisted_offset = self.persisted.__setitem__
        self.offset_key = b"__faust\0offset__"

    def _db_for_partition(self, partition: int) -> rocksdict.Rdict:
        if partition not in self._dbs:
            self._dbs[partition] = rocksdict.Rdict(
                str(self.directory / f"p{partition}"), options=rocksdict.Options(raw_mode=True)
            )
        return self._dbs[partition]


class _Changelog:
    """Acknowledges every record at commit (the transaction committed)."""

    def __init__(self) -> None:
        self._waiting: list[Any] = []

    def produce_raw(
        self, topic: str, partition: int, key: bytes, value: bytes | None, on_delivery: Any
    ) -> None:
        offset = len(self._waiting)
        message = SimpleNamespace(offset=lambda: offset, topic=lambda: topic)
        self._waiting.append(lambda: on_delivery(None, message))

    async def commit(self) -> None:
        for deliver in self._waiting:
            deliver()
        self._waiting.clear()


def test_the_trackers_committed_batch_waits_for_space_and_every_table_partition_reopens(
    disk: SmallDisk,
) -> None:
    store = _FaustStore(disk.path)
    table = SimpleNamespace(
        data=store, changelog_topic=SimpleNamespace(get_topic_name=lambda: "app-timers-changelog")
    )
    book = HealthBook()
    book.ready()
    tables = FaustTables({Table.TIMERS: table}, _Changelog(), directory=disk.path, health=book)
    tables.put(Table.TIMERS, 1, b"held", b"before")  # partition 1: open, not written below
    asyncio.run(tables.sync())
    disk.fill()
    for n in range(2000):
        tables.put(Table.TIMERS, 0, b"%06d" % n, b"v" * 500)
    loop = asyncio.new_event_loop()
    synced = loop.create_task(tables.sync())
    try:
        loop.run_until_complete(asyncio.wait_for(_until(lambda: bool(book.problems)), 30))
        assert str(disk.path) in disk_problems(book)[0]
        assert not synced.done()
        disk.free()
        loop.run_until_complete(asyncio.wait_for(synced, 60))
    finally:
        loop.close()
    assert book.status is Health.OK
    assert tables.get(Table.TIMERS, 0, b"001999") == b"v" * 500
    assert tables.get(Table.TIMERS, 1, b"held") == b"before"  # reopened, not "not held"
    for db in store._dbs.values():
        db.close()


async def _until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.1)
