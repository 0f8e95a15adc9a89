"""A sagalog service under test as an OS process: ``python -m <module>``, its output to a log.

The one runner of the integration tests' agents, trackers and gateways, so that each
starts, signals, stops and reports the same way: SIGTERM and a bounded wait (the
service contract's clean stop), SIGKILL for a crash, the log read back to judge.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class ServiceProcess:
    """One service process.

    Attributes:
        stopped: set by ``stop`` and ``kill``: the test ended it, it did not exit by itself.
    """

    env: dict[str, str]
    log: Path
    module: str
    cwd: Path = REPO
    process: subprocess.Popen[bytes] | None = None
    stopped: bool = False

    def start(self) -> ServiceProcess:
        self.stopped = False
        handle = self.log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module],
            cwd=self.cwd,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        return self

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        self.stopped = True
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM and wait; the exit code. Past ``timeout`` it is killed, and the wait's
        ``TimeoutExpired`` raised: the contract says a service stops within its grace."""
        self.stopped = True
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            raise

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""
