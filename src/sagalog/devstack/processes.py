"""Detached JVMs, their pid records, ports and logs.

The services must outlive the ``sagalog dev up`` that started them, so they run
in their own session with output going to files; what ``status`` and ``down``
later need to know about them is written to a small JSON pid record.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from sagalog.devstack.commands import identity_flags
from sagalog.devstack.settings import inherited_environment

#: How often a wait loop looks again; the waits themselves are bounded by deadlines.
POLL_INTERVAL_S = 0.1
#: First line written to a log before each start, so a run's own lines can be found.
START_MARKER = "=== sagalog dev: starting"


@dataclass(frozen=True)
class PidRecord:
    """What ``up`` remembers about a component it started.

    Attributes:
        component: ``kafka`` or ``registry``.
        pid: the JVM's process id.
        port: the port clients use.
        version: the Kafka or Apicurio version running.
        java: the ``java`` executable and its version, as shown by ``status``.
        started_at: Unix time of the start.
    """

    component: str
    pid: int
    port: int
    version: str
    java: str
    started_at: float


def write_pid_record(path: Path, record: PidRecord) -> None:
    """Write atomically, so a concurrent ``status`` never reads half a record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(asdict(record), indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


def read_pid_record(path: Path) -> PidRecord | None:
    """The record, or None if there is none or it is unreadable (treated as stale)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return PidRecord(
            component=str(data["component"]),
            pid=int(data["pid"]),
            port=int(data["port"]),
            version=str(data["version"]),
            java=str(data["java"]),
            started_at=float(data["started_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (zombies count as dead).

    A JVM started by this very Python process stays a zombie after it exits until
    it is reaped, and ``kill(pid, 0)`` still succeeds on a zombie; reaping first
    keeps ``down`` from waiting for a process that is already gone.
    """
    with contextlib.suppress(ChildProcessError, OSError):
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        if _state(stat) != "Z":
            return True
        # A JVM's main thread can be a zombie while its other threads still tear down and
        # hold its files and ports (an immediate restart after a SIGKILL can find the
        # port taken). The process is gone only when no thread of it is left running.
        return any(_state(task / "stat") not in ("Z", "X") for task in stat.parent.glob("task/*"))
    return True


def _state(stat: Path) -> str:
    """The one-letter state in a /proc ``stat`` file (after the command in parentheses)."""
    return stat.read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()[0]


def command_line(pid: int) -> list[str] | None:
    """The process's arguments, from /proc on Linux and ``ps`` elsewhere."""
    proc = Path(f"/proc/{pid}/cmdline")
    if proc.parent.is_dir():
        try:
            return [arg for arg in proc.read_bytes().decode(errors="replace").split("\0") if arg]
        except OSError:
            return None
    try:
        completed = subprocess.run(
            ["ps", "-ww", "-o", "command=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = completed.stdout.strip()
    return text.split(" ") if completed.returncode == 0 and text else None


def is_ours(*, pid: int, component: str, state_dir: Path) -> bool:
    """Whether ``pid`` is the ``component`` JVM of the stack in ``state_dir``.

    Guards against a stale pid file whose pid the OS has since given to an
    unrelated process: ``down`` must never signal that one.
    """
    if not is_running(pid):
        return False
    arguments = command_line(pid)
    if arguments is None:
        return False
    return all(
        flag in arguments for flag in identity_flags(component=component, state_dir=state_dir)
    )


def port_is_free(*, host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now.

    Binding is the real test (it also catches listeners on ``0.0.0.0`` or ``::``);
    ``SO_REUSEADDR`` keeps a port in TIME_WAIT after our own ``down`` from counting
    as taken.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return not port_answers(host=host, port=port, timeout_s=0.2)


def port_answers(*, host: str, port: int, timeout_s: float) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def spawn_detached(*, command: Sequence[str], log_path: Path, nice: int = 0) -> int:
    """Start ``command`` in its own session, stdout and stderr appended to ``log_path``.

    Its own session means no SIGHUP when the terminal closes and no SIGINT when
    the user presses Ctrl-C in the shell that ran ``up``. ``posix_spawn`` rather
    than ``subprocess.Popen`` because the JVM is meant to outlive this process:
    a ``Popen`` object would warn that its child is "still running" when collected.
    The child inherits no other descriptor (Python opens them close-on-exec).

    A ``nice`` other than 0 runs the command through ``nice(1)``, which sets the
    niceness before ``exec``: every thread the JVM starts inherits it, where a
    ``setpriority`` on the pid afterwards would reach only the threads that
    already exist (Linux keeps niceness per thread). ``nice`` execs the command,
    so the pid is the JVM's.

    Its session gets the same niceness (``weigh_session``): where the kernel groups
    processes by session for scheduling (autogroup, on by default in most
    distributions), a thread's niceness counts only against its own session's
    threads, and every session weighs the same; without it a JVM of a hundred threads
    at -10 gets no more of the machine than one busy test process.

    Returns:
        The pid of the new process.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"{START_MARKER} at {stamp}: {' '.join(command)}\n")
    if nice:
        command = [shutil.which("nice") or "/usr/bin/nice", "-n", str(nice), *command]
    pid = os.posix_spawn(
        command[0],
        list(command),
        inherited_environment(),
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(log_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ],
        setsid=True,
    )
    if nice:
        refused = weigh_session(pid, nice)
        if refused is not None:
            with log_path.open("a", encoding="utf-8") as log:
                log.write(f"{START_MARKER}: {refused}\n")
    return pid


def weigh_session(pid: int, nice: int) -> str | None:
    """Give the session (scheduling autogroup) of ``pid`` the niceness ``nice``; why
    not, when it could not be given (None when it was, or when the kernel does not
    group by session, so that the threads' own niceness already counts).

    ``/proc/<pid>/autogroup`` is the kernel's interface for it (sched(7)); lowering
    it below 0 needs the right to lower a niceness, as ``nice(1)`` does.
    """
    path = Path(f"/proc/{pid}/autogroup")
    if not path.exists():
        return None
    try:
        path.write_text(f"{nice}\n")
    except OSError as exc:
        return f"cannot set the niceness of the session of pid {pid} to {nice}: {exc}"
    return None


@dataclass(frozen=True)
class StopOutcome:
    """How a process ended: ``SIGTERM`` (clean) or ``SIGKILL`` (it ignored SIGTERM)."""

    signal_name: str
    elapsed_s: float


def wait_for_exit(
    *, pid: int, timeout_s: float, clock: Callable[[], float] = time.monotonic
) -> bool:
    """Poll until ``pid`` has exited or ``timeout_s`` passed; True if it exited."""
    deadline = clock() + timeout_s
    while is_running(pid):
        if clock() >= deadline:
            return False
        time.sleep(POLL_INTERVAL_S)
    return True


def stop_process(
    *, pid: int, timeout_s: float, clock: Callable[[], float] = time.monotonic
) -> StopOutcome:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL.

    SIGTERM first because both JVMs shut down cleanly on it: Kafka writes a clean
    shutdown marker (no log recovery on the next start) and the registry closes
    its H2 file.
    """
    started = clock()
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if wait_for_exit(pid=pid, timeout_s=timeout_s, clock=clock):
        return StopOutcome("SIGTERM", clock() - started)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    wait_for_exit(pid=pid, timeout_s=10.0, clock=clock)
    return StopOutcome("SIGKILL", clock() - started)
