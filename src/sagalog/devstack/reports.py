"""What ``LocalStack.up``, ``down`` and ``status`` return.

Plain frozen dataclasses so the CLI, the integration tests and ``make demo``
read the same facts, and ``status --json`` is just ``to_dict``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ComponentState(enum.Enum):
    """The state of one service, as far as this stack can tell."""

    RUNNING = "running"
    """Our process is alive and answered a request."""
    NOT_ANSWERING = "not answering"
    """Our process is alive but did not answer (starting, or stuck)."""
    STOPPED = "stopped"
    """No process of this stack; the port is free."""
    PORT_TAKEN = "stopped, port taken"
    """No process of this stack, but another process listens on the port."""


@dataclass(frozen=True)
class ComponentStatus:
    """One row of ``sagalog dev status``.

    Attributes:
        name: ``kafka`` or ``registry``.
        state: see ``ComponentState``.
        pid: the JVM's pid when this stack runs it.
        host: the address it listens on.
        port: the port clients use.
        version: the running version, or the one ``up`` would start.
        java: the java executable and version it runs on, when running.
        log_file: where its output goes.
    """

    name: str
    state: ComponentState
    pid: int | None
    host: str
    port: int
    version: str | None
    java: str | None
    log_file: Path

    @property
    def running(self) -> bool:
        """Alive and answering: usable by clients."""
        return self.state is ComponentState.RUNNING

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``status --json``."""
        return {
            "name": self.name,
            "state": self.state.value,
            "running": self.running,
            "pid": self.pid,
            "host": self.host,
            "port": self.port,
            "version": self.version,
            "java": self.java,
            "log_file": str(self.log_file),
        }


@dataclass(frozen=True)
class StackStatus:
    """Both components plus the addresses clients should use."""

    kafka: ComponentStatus
    registry: ComponentStatus
    bootstrap_servers: str
    schema_registry_url: str

    @property
    def components(self) -> tuple[ComponentStatus, ComponentStatus]:
        """In start order: Kafka first, because the registry is useless without it."""
        return (self.kafka, self.registry)

    @property
    def healthy(self) -> bool:
        """Both running; ``status`` exits 0 only then."""
        return self.kafka.running and self.registry.running

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``status --json``."""
        return {
            "healthy": self.healthy,
            "bootstrap_servers": self.bootstrap_servers,
            "schema_registry_url": self.schema_registry_url,
            "components": {c.name: c.to_dict() for c in self.components},
        }


class StartAction(enum.Enum):
    """What ``up`` did for one component."""

    STARTED = "started"
    ALREADY_RUNNING = "already running"


@dataclass(frozen=True)
class ComponentStart:
    """The outcome of ``up`` for one component.

    Attributes:
        name: ``kafka`` or ``registry``.
        action: started now, or found running and healthy.
        pid: the JVM's pid.
        port: the port clients use.
        version: the version running.
        ready_after_s: from spawn (or from finding it) to the first good answer.
    """

    name: str
    action: StartAction
    pid: int
    port: int
    version: str
    ready_after_s: float


@dataclass(frozen=True)
class UpReport:
    """The outcome of ``up``: both components and the addresses to export."""

    kafka: ComponentStart
    registry: ComponentStart
    bootstrap_servers: str
    schema_registry_url: str
    elapsed_s: float


@dataclass(frozen=True)
class ComponentStop:
    """The outcome of ``down`` for one component.

    Attributes:
        name: ``kafka`` or ``registry``.
        pid: the pid that was stopped, None if nothing ran.
        signal_name: ``SIGTERM`` (clean), ``SIGKILL`` (forced) or None (was not running).
        elapsed_s: time from the signal to the exit.
    """

    name: str
    pid: int | None
    signal_name: str | None
    elapsed_s: float


@dataclass(frozen=True)
class DownReport:
    """The outcome of ``down``, in stop order: the reverse of the start order."""

    registry: ComponentStop
    kafka: ComponentStop
