"""An agent's store on a real full disk (a small tmpfs, ``disks.SmallDisk``; root
only): a write waits while the disk is full, the health book names the directory,
and the write goes through, nothing lost, once the space returns."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import external_tools
from sagalog.agents.state_store import StateStore
from sagalog.disk_space import disk_problems
from sagalog.health import Health, HealthBook
from sagalog.position import RecordPosition

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
