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
        name: a Kafka node (``kafka``, ``kafka-<id>``) or ``registry``.
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
    """Every component plus the shape of the stack and the addresses clients should use.

    Attributes:
        brokers: one row per Kafka node, in node id order.
        registry: the schema registry.
        bootstrap_servers: every node's client address.
        schema_registry_url: the registry's Confluent-compatible API.
        secure: whether this is the secure variant (``sagalog dev env`` has the logins).
    """

    brokers: tuple[ComponentStatus, ...]
    registry: ComponentStatus
    bootstrap_servers: str
    schema_registry_url: str
    secure: bool = False

    @property
    def kafka(self) -> ComponentStatus:
        """The first (with one broker, the only) Kafka node."""
        return self.brokers[0]

    @property
    def components(self) -> tuple[ComponentStatus, ...]:
        """In start order: Kafka first, because the registry is useless without it."""
        return (*self.brokers, self.registry)

    @property
    def healthy(self) -> bool:
        """Every component running; ``status`` exits 0 only then."""
        return all(component.running for component in self.components)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``status --json``."""
        return {
            "healthy": self.healthy,
            "brokers": len(self.brokers),
            "secure": self.secure,
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
        name: a Kafka node (``kafka``, ``kafka-<id>``) or ``registry``.
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
    """The outcome of ``up``: every component and the addresses to export."""

    brokers: tuple[ComponentStart, ...]
    registry: ComponentStart
    bootstrap_servers: str
    schema_registry_url: str
    elapsed_s: float

    @property
    def kafka(self) -> ComponentStart:
        """The first (with one broker, the only) Kafka node."""
        return self.brokers[0]


@dataclass(frozen=True)
class ComponentStop:
    """The outcome of ``down`` for one component.

    Attributes:
        name: a Kafka node (``kafka``, ``kafka-<id>``) or ``registry``.
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
    brokers: tuple[ComponentStop, ...]

    @property
    def kafka(self) -> ComponentStop:
        """The first (with one broker, the only) Kafka node."""
        return self.brokers[0]
