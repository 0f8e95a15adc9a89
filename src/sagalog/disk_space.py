"""A full disk under a local store: wait for space, say so, resume.

A RocksDB write refused for want of space (ENOSPC) leaves the database in a
sticky error state: every later write fails with the same error even once space
returns, until the database is closed and opened again (RocksDB's ``Resume`` is
not exposed by rocksdict). Crashing on it would be worse than useless: a restarted
service finds the same full disk, and a supervisor restarts it in a loop. The
platform's rule is the broker outage's: a full disk is ridden out in process.
The service stops taking work (the write that failed blocks the loop that made
it), reports unhealthy with the full directory named (``/health/ready`` answers
503, ``/health/live`` stays 200: a restart cannot free a disk), checks for space
with backoff, reopens the database once there is room, repeats the write (every
local write here is idempotent: a put of the same key and value), and goes on.

The decisions are plain functions (``full_path``, ``SpaceWait``); ``wait_for_space``
and ``await_space`` are the thin shells a store wraps its writes in.
"""

from __future__ import annotations

import asyncio
import errno
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sagalog.health import HealthBook

T = TypeVar("T")

_ROCKSDB_NO_SPACE = re.compile(r"No space left on device")
# RocksDB names the file it was writing: "While appending to file: /x/y/000004.log: ..."
_ROCKSDB_FILE = re.compile(r"(?:file|dir(?:ectory)?): (/[^:]+?)(?::|$)")

PROBLEM = "disk"
"""The ``HealthBook`` key prefix of a full disk: ``disk <directory>``."""


def full_path(error: BaseException) -> str | None:
    """The file a write was refused on for want of space; None when ``error`` is not that.

    An ``OSError`` with ENOSPC gives its filename (or "" when it has none); a
    RocksDB error (rocksdict raises a bare ``Exception`` with RocksDB's status text)
    gives the file named in its message. The cause chain is searched, as a store's
    error can surface wrapped in its caller's.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return str(current.filename or "")
        text = str(current)
        if _ROCKSDB_NO_SPACE.search(text):
            found = _ROCKSDB_FILE.search(text)
            return found.group(1) if found else ""
        current = current.__cause__ or current.__context__
    return None


def problem_key(directory: Path) -> str:
    return f"{PROBLEM} {directory}"


def problem_text(directory: Path, refused: str) -> str:
    """What ``/health/ready`` says of a full disk: the directory, and what happens next."""
    where = f" (writing {refused})" if refused and refused != str(directory) else ""
    return (
        f"no space left on device for {directory}{where}: work waits, and resumes "
        "by itself once space returns; free space on that filesystem"
    )


def disk_problems(book: HealthBook) -> list[str]:
    """The full disks a service waits on, as its readiness lists them."""
    return [p.error for what, p in sorted(book.problems.items()) if what.startswith(PROBLEM + " ")]


@dataclass(frozen=True)
class SpaceWait:
    """How a store waits for space.

    Attributes:
        min_free_bytes: the room to see before trying again: a write into the last
            few pages would fail again at once, and RocksDB needs room for a new
            WAL file and a flush.
        base_s: the first wait.
        max_s: the longest wait between two looks.
    """

    min_free_bytes: int = 8 << 20
    base_s: float = 0.5
    max_s: float = 10.0

    def delay(self, attempt: int) -> float:
        """Seconds before look number ``attempt`` (1 = the first after the failure)."""
        return float(min(self.max_s, self.base_s * 2 ** max(0, attempt - 1)))

    def room(self, free_bytes: int) -> bool:
        """Whether there is room enough to reopen and write again."""
        return free_bytes >= self.min_free_bytes


def free_bytes(directory: Path) -> int:
    return shutil.disk_usage(directory).free


def wait_for_space(
    write: Callable[[], T],
    *,
    directory: Path,
    reopen: Callable[[], None],
    health: HealthBook | None = None,
    policy: SpaceWait = SpaceWait(),
    sleep: Callable[[float], None] = time.sleep,
    free: Callable[[Path], int] = free_bytes,
) -> T:
    """``write()``, waiting out a full disk under ``directory`` (see the module).

    Blocks the calling thread until the write went through; any other error is
    raised as it was.
    """
    attempt = 0
    while True:
        try:
            result = write()
        except Exception as exc:
            _refused(exc, directory, health)
            while True:
                attempt += 1
                sleep(policy.delay(attempt))
                if policy.room(free(directory)) and _reopened(reopen):
                    break
            continue
        _resumed(attempt, directory, health)
        return result


async def await_space(
    write: Callable[[], T],
    *,
    directory: Path,
    reopen: Callable[[], None],
    health: HealthBook | None = None,
    policy: SpaceWait = SpaceWait(),
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    free: Callable[[Path], int] = free_bytes,
) -> T:
    """``wait_for_space`` for an event loop: the waits do not block it (the health
    server and the loop's own timers go on)."""
    attempt = 0
    while True:
        try:
            result = write()
        except Exception as exc:
            _refused(exc, directory, health)
            while True:
                attempt += 1
                await sleep(policy.delay(attempt))
                if policy.room(free(directory)) and _reopened(reopen):
                    break
            continue
        _resumed(attempt, directory, health)
        return result


def _refused(error: Exception, directory: Path, health: HealthBook | None) -> None:
    """Raise ``error`` unless it is a full disk; report that one."""
    refused = full_path(error)
    if refused is None:
        raise error
    if health is not None:
        health.degrade(problem_key(directory), problem_text(directory, refused))


def _reopened(reopen: Callable[[], None]) -> bool:
    """Reopen the store; False when RocksDB's own files found no room yet."""
    try:
        reopen()
    except Exception as exc:
        if full_path(exc) is None:
            raise
        return False
    return True


def _resumed(attempt: int, directory: Path, health: HealthBook | None) -> None:
    if attempt and health is not None:
        health.recover(problem_key(directory))
