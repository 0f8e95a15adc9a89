"""A full disk under a local store: recognised, reported with its directory, waited
out with backoff, resumed after a reopen (``sagalog.disk_space``)."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest

from sagalog.disk_space import (
    SpaceWait,
    await_space,
    disk_problems,
    full_path,
    problem_key,
    wait_for_space,
)
from sagalog.health import Health, HealthBook

ROCKSDB_FULL = (
    "IO error: No space left on device: While appending to file: "
    "/data/tracker-a/tables/p0/000004.log: No space left on device"
)
DIRECTORY = Path("/data/tracker-a")


def test_rocksdbs_refusal_names_the_file_it_was_writing() -> None:
    assert full_path(Exception(ROCKSDB_FULL)) == "/data/tracker-a/tables/p0/000004.log"


def test_an_os_error_with_enospc_names_its_file() -> None:
    error = OSError(errno.ENOSPC, "No space left on device", "/data/x.sst")
    assert full_path(error) == "/data/x.sst"


def test_a_full_disk_is_found_through_the_cause_chain() -> None:
    try:
        try:
            raise Exception(ROCKSDB_FULL)
        except Exception as inner:
            raise RuntimeError("the batch failed") from inner
    except RuntimeError as outer:
        assert full_path(outer) == "/data/tracker-a/tables/p0/000004.log"


@pytest.mark.parametrize(
    "error",
    [
        Exception("IO error: Corruption: block checksum mismatch"),
        OSError(errno.EACCES, "Permission denied", "/data/x"),
        KeyError("k"),
    ],
)
def test_other_errors_are_not_a_full_disk(error: BaseException) -> None:
    assert full_path(error) is None


def test_the_waits_grow_to_a_cap() -> None:
    policy = SpaceWait(base_s=0.5, max_s=10.0)
    assert [policy.delay(n) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_room_means_enough_for_a_wal_file_and_a_flush() -> None:
    policy = SpaceWait(min_free_bytes=8 << 20)
    assert not policy.room(4096)
    assert policy.room(8 << 20)


class Disk:
    """A store over a disk that is full until ``free_after`` looks have been made."""

    def __init__(self, *, free_after: int) -> None:
        self.looks = 0
        self.free_after = free_after
        self.open = True
        self.reopens = 0
        self.writes = 0
        self.slept: list[float] = []

    def write(self) -> str:
        self.writes += 1
        if not self.open or self.looks < self.free_after:
            self.open = False  # RocksDB's sticky error: refused until reopened
            raise Exception(ROCKSDB_FULL)
        return "written"

    def free(self, directory: Path) -> int:
        self.looks += 1
        return (1 << 30) if self.looks >= self.free_after else 0

    def reopen(self) -> None:
        self.reopens += 1
        self.open = True


def test_a_write_waits_while_the_disk_is_full_says_so_and_resumes_after_a_reopen() -> None:
    disk = Disk(free_after=4)
    book = HealthBook(clock=lambda: 0.0)
    book.ready()
    seen: list[Health] = []

    def sleep(seconds: float) -> None:
        disk.slept.append(seconds)
        seen.append(book.status)
        if len(seen) == 1:
            assert disk_problems(book) == [
                f"no space left on device for {DIRECTORY} (writing "
                "/data/tracker-a/tables/p0/000004.log): work waits, and resumes by itself "
                "once space returns; free space on that filesystem"
            ]

    result = wait_for_space(
        disk.write,
        directory=DIRECTORY,
        reopen=disk.reopen,
        health=book,
        policy=SpaceWait(base_s=0.5, max_s=10.0),
        sleep=sleep,
        free=disk.free,
    )
    assert result == "written"
    assert disk.slept == [0.5, 1.0, 2.0, 4.0]  # one look per wait, until the 4th saw room
    assert disk.reopens == 1 and disk.writes == 2
    assert set(seen) == {Health.DEGRADED}
    assert book.status is Health.OK and problem_key(DIRECTORY) not in book.problems


def test_a_reopen_refused_for_want_of_space_is_waited_out_too() -> None:
    disk = Disk(free_after=1)
    failures = [Exception(ROCKSDB_FULL)]

    def reopen() -> None:
        if failures:
            raise failures.pop()
        disk.reopen()

    wait_for_space(
        disk.write,
        directory=DIRECTORY,
        reopen=reopen,
        sleep=disk.slept.append,
        free=disk.free,
    )
    assert disk.reopens == 1 and len(disk.slept) == 2


def test_any_other_error_is_raised_at_once() -> None:
    def write() -> None:
        raise Exception("IO error: Corruption: bad block")

    with pytest.raises(Exception, match="Corruption"):
        wait_for_space(write, directory=DIRECTORY, reopen=lambda: None, sleep=lambda s: None)


def test_the_event_loops_wait_does_the_same_without_blocking_it() -> None:
    disk = Disk(free_after=2)
    book = HealthBook(clock=lambda: 0.0)
    book.ready()

    async def sleep(seconds: float) -> None:
        disk.slept.append(seconds)

    result = asyncio.run(
        await_space(
            disk.write,
            directory=DIRECTORY,
            reopen=disk.reopen,
            health=book,
            sleep=sleep,
            free=disk.free,
        )
    )
    assert result == "written" and disk.slept == [0.5, 1.0] and book.status is Health.OK
