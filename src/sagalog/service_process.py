"""A sagalog service as a child process, started the way a deployment starts it.

Tests that run on a real cluster (a project's own, the scaffold's) need the tracker
and their agents running as they will in production: ``sagalog run tracker`` and
``sagalog run agent MODULE`` in processes of their own, each with its settings in
its environment. ``ServiceProcess`` starts one, waits on its ``/health/ready`` (not
on a sleep, nor on a line in its log), and stops it with SIGTERM, returning the
exit code for the test to compare with ``ExitCode.STOPPED``.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from sagalog.errors import ServiceUnavailableError

# Listening ports are picked below the kernel's ephemeral range (32768-60999 on
# Linux, higher elsewhere). A port the kernel picked (bind to 0) and that was then
# released is soon taken as the local end of some outgoing connection, a Kafka
# client's, and a service binding it later fails (EADDRINUSE) for as long as that
# connection lives (docs/design/incident-history.md).
LISTEN_PORTS = range(30000, 32768)
_handed_out: set[int] = set()


def free_port() -> int:
    """A port nobody listens on now, on loopback, that no outgoing connection will take.

    Never the same port twice in one process, so two services set up one after the
    other, before either binds, cannot be handed the same one.

    Raises:
        ServiceUnavailableError: every port of ``LISTEN_PORTS`` is taken.
    """
    candidates = [port for port in LISTEN_PORTS if port not in _handed_out]
    for port in random.sample(candidates, len(candidates)):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise ServiceUnavailableError(
        f"no free port in {LISTEN_PORTS.start}-{LISTEN_PORTS.stop - 1} on 127.0.0.1; "
        "stop the services holding them"
    )


@dataclass
class ServiceProcess:
    """``sagalog <args>`` in a child process, with its health endpoints on ``health_port``.

    Args:
        name: what the messages call it.
        args: the ``sagalog`` command line after ``sagalog`` (``["run", "tracker"]``).
        env: settings for it, over this process's environment.
        log: where its stdout and stderr go.
        health_port: where it answers ``/health/ready`` (set as ``SAGALOG_HEALTH_PORT``,
            which every service's settings read below their own prefix).
    """

    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    health_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @classmethod
    def tracker(
        cls,
        project_dir: Path,
        *,
        app_id: str,
        gate_secret: str,
        work_dir: Path,
        env: dict[str, str] | None = None,
    ) -> ServiceProcess:
        """A tracker worker over the project's flows, its tables under ``work_dir``."""
        return cls(
            name=f"tracker {app_id}",
            args=["--project-dir", str(project_dir), "run", "tracker"],
            env={
                "SAGALOG_PROJECT_DIR": str(project_dir),
                "SAGALOG_TRACKER_APP_ID": app_id,
                "SAGALOG_TRACKER_GATE_SECRET": gate_secret,
                "SAGALOG_TRACKER_DATA_DIR": str(work_dir / f"{app_id}-data"),
                **(env or {}),
            },
            log=work_dir / f"{app_id}.log",
        )

    @classmethod
    def agent(
        cls,
        module: str,
        project_dir: Path,
        *,
        work_dir: Path,
        path: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> ServiceProcess:
        """The agent declared in ``module`` (importable from ``path``), state under ``work_dir``."""
        slug = module.replace(":", "-").replace(".", "-")
        args = ["--project-dir", str(project_dir), "run", "agent", module]
        if path is not None:
            args += ["--path", str(path)]
        return cls(
            name=f"agent {module}",
            args=args,
            env={
                "SAGALOG_PROJECT_DIR": str(project_dir),
                "SAGALOG_AGENT_DATA_DIR": str(work_dir / f"{slug}-data"),
                **(env or {}),
            },
            log=work_dir / f"{slug}.log",
        )

    def start(self) -> ServiceProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "SAGALOG_HEALTH_HOST": "127.0.0.1",
            "SAGALOG_HEALTH_PORT": str(self.health_port),
            **self.env,
        }
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "sagalog", *self.args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, *, timeout_s: float = 180) -> float:
        """Wait until it answers 200 on ``/health/ready``; the seconds that took.

        Raises:
            ServiceUnavailableError: it exited (with its code and the end of its log),
                or was not ready within ``timeout_s``.
        """
        started = time.monotonic()
        url = f"http://127.0.0.1:{self.health_port}/health/ready"
        while time.monotonic() - started < timeout_s:
            if not self.alive:
                code = None if self.process is None else self.process.returncode
                raise ServiceUnavailableError(
                    f"{self.name} exited ({code}) before it was ready; its log ends:\n{self.tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return time.monotonic() - started
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.25)
        raise ServiceUnavailableError(
            f"{self.name} was not ready within {timeout_s:g}s ({url}); its log ends:\n{self.tail()}"
        )

    def stop(self, *, timeout_s: float = 60) -> int | None:
        """SIGTERM, then wait for the exit; its code (SIGKILL past ``timeout_s``: None)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
                return None
        return self.process.returncode

    def tail(self, lines: int = 30) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
