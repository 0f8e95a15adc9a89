"""Port-taken detection, pid records and log tails: the process bookkeeping's pure parts."""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagalog.devstack.logs import tail_lines
from sagalog.devstack.processes import (
    PidRecord,
    is_ours,
    is_running,
    port_is_free,
    read_pid_record,
    spawn_detached,
    weigh_session,
    write_pid_record,
)


@pytest.fixture
def listener() -> Iterator[int]:
    """A port some other process (here: this test) listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def test_a_port_with_a_listener_is_taken(listener: int) -> None:
    assert not port_is_free(host="127.0.0.1", port=listener)


def test_a_listener_on_all_interfaces_also_takes_the_loopback_port() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("0.0.0.0", 0))
        server.listen()
        assert not port_is_free(host="127.0.0.1", port=server.getsockname()[1])


def test_a_closed_port_is_free() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert port_is_free(host="127.0.0.1", port=port)


def test_a_niceness_reaches_the_threads_the_spawned_process_starts(tmp_path: Path) -> None:
    """Set before ``exec``, so a JVM's later threads inherit it (Linux keeps it per thread)."""
    log = tmp_path / "child.log"
    report = (
        "import os, threading\n"
        "seen = []\n"
        "def look(): seen.append(os.getpriority(os.PRIO_PROCESS, 0))\n"
        "thread = threading.Thread(target=look)\n"
        "thread.start(); thread.join()\n"
        "print('niceness', os.nice(0), seen[0], flush=True)\n"
    )
    before = os.nice(0)
    pid = spawn_detached(command=[sys.executable, "-c", report], log_path=log, nice=5)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, log.read_text()
    expected = min(before + 5, 19)
    assert f"niceness {expected} {expected}" in log.read_text()


@pytest.mark.skipif(
    not Path("/proc/self/autogroup").exists(), reason="the kernel does not group by session"
)
def test_the_spawned_session_gets_the_niceness_too(tmp_path: Path) -> None:
    """Under autogroup scheduling a thread's niceness counts only within its session;
    the session's own niceness is what weighs it against other sessions."""
    log = tmp_path / "child.log"
    wait = "import time; time.sleep(30)"
    pid = spawn_detached(command=[sys.executable, "-c", wait], log_path=log, nice=7)
    try:
        child = Path(f"/proc/{pid}/autogroup").read_text().split()
        ours = Path("/proc/self/autogroup").read_text().split()
        assert child[-1] == "7"
        # A process in the kernel's default group (a service manager's session, as
        # under CI) reads an empty file: the child's new session is another group.
        assert not ours or ours[0] != child[0]
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_session_niceness_that_cannot_be_set_is_said(tmp_path: Path) -> None:
    assert weigh_session(2**22 + 12345, 5) is None  # no such process: nothing to weigh
    if os.geteuid() != 0 and Path("/proc/self/autogroup").exists():
        assert "cannot set the niceness" in (weigh_session(os.getpid(), -10) or "")


def test_pid_records_round_trip_and_garbage_reads_as_none(tmp_path: Path) -> None:
    record = PidRecord("kafka", 1234, 9092, "4.4.0", "/jdk/bin/java (17)", 1.5)
    path = tmp_path / "run" / "kafka.json"
    write_pid_record(path, record)
    assert read_pid_record(path) == record
    path.write_text("{")
    assert read_pid_record(path) is None
    assert read_pid_record(tmp_path / "missing.json") is None


def test_this_process_runs_but_is_not_a_dev_stack_jvm(tmp_path: Path) -> None:
    assert is_running(os.getpid())
    assert not is_ours(pid=os.getpid(), component="kafka", state_dir=tmp_path)


def test_a_pid_that_no_longer_exists_is_not_running() -> None:
    assert not is_running(2**22 + 12345)  # above the default pid_max: never allocated


def test_tail_lines_reads_the_end_of_a_long_file(tmp_path: Path) -> None:
    log = tmp_path / "kafka.log"
    log.write_text("".join(f"line {i}\n" for i in range(10_000)))
    assert tail_lines(log, count=3) == ["line 9997", "line 9998", "line 9999"]
    assert tail_lines(log, count=0) == []
    assert tail_lines(tmp_path / "none.log", count=5) == []


def test_tail_lines_of_a_short_file_returns_all_of_it(tmp_path: Path) -> None:
    log = tmp_path / "registry.log"
    log.write_text("only\nlines")
    assert tail_lines(log, count=20) == ["only", "lines"]
