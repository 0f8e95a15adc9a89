"""Starting, adopting, stopping and inspecting one component, whatever it is.

``LocalStack`` decides *what* to run (which jars, which Java, which flags); the
``Supervisor`` knows *how* a detached JVM is launched, recognised, waited for and
stopped, identically for Kafka and the registry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sagalog.devstack.artifacts import Progress
from sagalog.devstack.java import JavaRuntime
from sagalog.devstack.layout import LOOPBACK, StackLayout
from sagalog.devstack.logs import tail_lines
from sagalog.devstack.processes import (
    START_MARKER,
    PidRecord,
    is_ours,
    is_running,
    port_is_free,
    read_pid_record,
    spawn_detached,
    stop_process,
    write_pid_record,
)
from sagalog.devstack.readiness import ProbeFactory, WaitResult, wait_until_ready
from sagalog.devstack.reports import (
    ComponentStart,
    ComponentState,
    ComponentStatus,
    ComponentStop,
    StartAction,
)
from sagalog.devstack.settings import DevStackSettings
from sagalog.errors import LocalStackError

LOG_TAIL_LINES = 20
_STATUS_PROBE_TIMEOUT_S = 5.0
# A JVM on a busy two-core machine can miss one probe (a GC pause, a cold code path):
# `status` once reported a healthy registry as not answering in the middle of a test run.
_STATUS_PROBE_TRIES = 2


@dataclass(frozen=True)
class Launch:
    """A component spawned by this ``up`` and not yet known to answer.

    Attributes:
        component: a Kafka node (``kafka``, ``kafka-<id>``) or ``registry``.
        pid: the JVM's pid.
        port: the port to probe.
        version: the version started.
        at: the supervisor clock's reading at spawn time.
    """

    component: str
    pid: int
    port: int
    version: str
    at: float


class Supervisor:
    """Process bookkeeping for the components of one state directory."""

    def __init__(
        self,
        *,
        settings: DevStackSettings,
        layout: StackLayout,
        progress: Progress,
        clock: Callable[[], float],
        probes: ProbeFactory,
    ) -> None:
        self._settings = settings
        self._probes = probes
        self._layout = layout
        self._progress = progress
        self._clock = clock

    def our_record(self, component: str) -> PidRecord | None:
        """The pid record if its process is still our JVM; a stale file is removed."""
        path = self._layout.pid_file(component=component)
        record = read_pid_record(path)
        if record is None:
            path.unlink(missing_ok=True)
            return None
        if is_ours(pid=record.pid, component=component, state_dir=self._settings.state_dir):
            return record
        path.unlink(missing_ok=True)
        self._progress(f"{component}: removed a stale pid file (pid {record.pid} is gone)")
        return None

    def log_tail(self, component: str) -> str:
        """The end of a component's log, indented, for error messages."""
        path = self._layout.log_file(component=component)
        lines = tail_lines(path, count=LOG_TAIL_LINES)
        starts = [i for i, line in enumerate(lines) if line.startswith(START_MARKER)]
        if starts:  # only this run's lines: earlier runs' errors would mislead
            lines = lines[starts[-1] + 1 :]
        body = "\n".join(f"  {line}" for line in lines) if lines else "  (empty)"
        return f"last {LOG_TAIL_LINES} lines of {path}:\n{body}"

    def check_ports(self, component: str, *, ports: list[tuple[int, str]]) -> None:
        """Fail before starting anything when a port (with its setting's name) is taken.

        Raises:
            LocalStackError: naming the port and the setting that moves it.
        """
        for port, setting in ports:
            if not port_is_free(host=LOOPBACK, port=port):
                other = port + 10000 if port < 55535 else port - 10000
                raise LocalStackError(
                    f"{component} cannot start: port {port} on {LOOPBACK} is taken by another "
                    f"process (not the {component} of the dev stack in "
                    f"{self._settings.state_dir}); stop that process, or pick another port "
                    f"with {setting}, e.g. `{setting}={other} sagalog dev up`"
                )

    def adopt(self, component: str, *, port: int) -> ComponentStart | None:
        """Reuse a component this stack already runs; None when it must be started.

        Raises:
            LocalStackError: it runs on another port than configured, or it runs but
                never answers.
        """
        record = self.our_record(component)
        if record is None:
            return None
        if record.port != port:
            raise LocalStackError(
                f"{component} already runs (pid {record.pid}) on port {record.port}, but the "
                f"settings now say {port}: run `sagalog dev down`, then `sagalog dev up` to "
                f"restart it on the new port"
            )
        probe = self._probes(component, port)
        elapsed = 0.0
        if probe():
            self._progress(f"{component}: already running (pid {record.pid}) on {LOOPBACK}:{port}")
        else:
            self._progress(f"{component}: running (pid {record.pid}) but not answering; waiting…")
            result = wait_until_ready(
                probe=probe,
                alive=lambda: is_running(record.pid),
                timeout_s=self._settings.ready_timeout_s,
                clock=self._clock,
            )
            self._raise_unless_ready(component, pid=record.pid, port=port, result=result)
            elapsed = result.elapsed_s
            self._progress(f"{component}: ready on {LOOPBACK}:{port} after {elapsed:.1f}s")
        return ComponentStart(
            name=component,
            action=StartAction.ALREADY_RUNNING,
            pid=record.pid,
            port=port,
            version=record.version,
            ready_after_s=elapsed,
        )

    def spawn(
        self, component: str, *, command: list[str], port: int, version: str, java: JavaRuntime
    ) -> Launch:
        """Start the JVM detached and record its pid; ``await_ready`` waits for it.

        Split from the wait so that both JVMs boot at the same time: the registry
        (SQL storage) does not need Kafka to start.
        """
        pid = spawn_detached(
            command=command,
            log_path=self._layout.log_file(component=component),
            nice=self._settings.jvm_nice,
        )
        spawned_at = self._clock()
        write_pid_record(
            self._layout.pid_file(component=component),
            PidRecord(component, pid, port, version, java.describe(), time.time()),
        )
        self._progress(f"{component}: starting {version} (pid {pid}) on {java.describe()}…")
        return Launch(component=component, pid=pid, port=port, version=version, at=spawned_at)

    def await_ready(self, launch: Launch) -> ComponentStart:
        """Wait for the first good answer of a spawned component.

        Raises:
            LocalStackError: the JVM exited during startup, or did not answer within
                ``ready_timeout_s`` (it is then stopped, so the next ``up`` starts clean).
        """
        component, pid, port = launch.component, launch.pid, launch.port
        remaining = self._settings.ready_timeout_s - (self._clock() - launch.at)
        result = wait_until_ready(
            probe=self._probes(component, port),
            alive=lambda: is_running(pid),
            timeout_s=max(remaining, 0.0),
            clock=self._clock,
        )
        self._raise_unless_ready(component, pid=pid, port=port, result=result)
        elapsed = self._clock() - launch.at
        self._progress(f"{component}: ready on {LOOPBACK}:{port} in {elapsed:.1f}s")
        return ComponentStart(
            name=component,
            action=StartAction.STARTED,
            pid=pid,
            port=port,
            version=launch.version,
            ready_after_s=elapsed,
        )

    def _raise_unless_ready(
        self, component: str, *, pid: int, port: int, result: WaitResult
    ) -> None:
        if result.ready:
            return
        if result.died:
            self._layout.pid_file(component=component).unlink(missing_ok=True)
            raise LocalStackError(
                f"{component} (pid {pid}) exited during startup after {result.elapsed_s:.1f}s; "
                f"{self.log_tail(component)}\nFix the cause shown above and rerun "
                f"`sagalog dev up`"
            )
        stop_process(pid=pid, timeout_s=self._settings.stop_timeout_s, clock=self._clock)
        self._layout.pid_file(component=component).unlink(missing_ok=True)
        raise LocalStackError(
            f"{component} (pid {pid}) did not answer on {LOOPBACK}:{port} within "
            f"{self._settings.ready_timeout_s:g}s, so it was stopped; "
            f"{self.log_tail(component)}\nIf the machine is only slow, raise "
            f"SAGALOG_DEV_READY_TIMEOUT_S and rerun `sagalog dev up`"
        )

    def stop(self, component: str) -> ComponentStop:
        """SIGTERM, then SIGKILL after ``stop_timeout_s``; says which it took."""
        record = self.our_record(component)
        if record is None:
            self._progress(f"{component}: not running")
            return ComponentStop(name=component, pid=None, signal_name=None, elapsed_s=0.0)
        outcome = stop_process(
            pid=record.pid, timeout_s=self._settings.stop_timeout_s, clock=self._clock
        )
        self._layout.pid_file(component=component).unlink(missing_ok=True)
        if outcome.signal_name == "SIGTERM":
            self._progress(
                f"{component}: stopped (pid {record.pid}, SIGTERM) in {outcome.elapsed_s:.1f}s"
            )
        else:
            self._progress(
                f"{component}: did not stop within {self._settings.stop_timeout_s:g}s of "
                f"SIGTERM; killed (pid {record.pid}, SIGKILL)"
            )
        return ComponentStop(
            name=component,
            pid=record.pid,
            signal_name=outcome.signal_name,
            elapsed_s=outcome.elapsed_s,
        )

    def abandon(self, launches: list[Launch]) -> None:
        """Stop, newest first, the components a failed ``up`` started and that still run."""
        for launch in reversed(launches):
            if not is_ours(
                pid=launch.pid, component=launch.component, state_dir=self._settings.state_dir
            ):
                continue
            stop_process(pid=launch.pid, timeout_s=self._settings.stop_timeout_s, clock=self._clock)
            self._layout.pid_file(component=launch.component).unlink(missing_ok=True)
            self._progress(f"{launch.component}: stopped again (pid {launch.pid}), `up` failed")

    def status(self, component: str, *, port: int, planned_version: str | None) -> ComponentStatus:
        """Ask once, with a short timeout: ``status`` must answer quickly even when stuck."""
        log_file = self._layout.log_file(component=component)
        record = read_pid_record(self._layout.pid_file(component=component))
        if record is not None and is_ours(
            pid=record.pid, component=component, state_dir=self._settings.state_dir
        ):
            probe = self._probes(component, record.port)
            answering = any(
                probe(timeout_s=_STATUS_PROBE_TIMEOUT_S) for _ in range(_STATUS_PROBE_TRIES)
            )
            return ComponentStatus(
                name=component,
                state=ComponentState.RUNNING if answering else ComponentState.NOT_ANSWERING,
                pid=record.pid,
                host=LOOPBACK,
                port=record.port,
                version=record.version,
                java=record.java,
                log_file=log_file,
            )
        free = port_is_free(host=LOOPBACK, port=port)
        return ComponentStatus(
            name=component,
            state=ComponentState.STOPPED if free else ComponentState.PORT_TAKEN,
            pid=None,
            host=LOOPBACK,
            port=port,
            version=planned_version,
            java=None,
            log_file=log_file,
        )
