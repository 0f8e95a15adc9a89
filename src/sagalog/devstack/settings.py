"""Settings of the embedded development stack (``sagalog dev``).

This module is the only place the dev stack reads the environment: everything
else receives a ``DevStackSettings`` so that tests and ``make demo`` can build
one by hand and nothing changes behind their back.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

JvmJit = Literal["quick", "full"]
"""The ``jvm_jit`` setting's values (``commands.JIT_FLAGS`` says what each adds)."""

_HEAP_SIZE = re.compile(r"^[1-9][0-9]*[kKmMgG]?$")


def inherited_environment() -> dict[str, str]:
    """The environment the JVMs and Maven inherit, unchanged.

    Children get the user's environment (proxies, locale, ``JAVA_TOOL_OPTIONS``) as
    any shell command would; it lives here so this module stays the only reader of
    ``os.environ``. The services' own settings are passed as ``-D`` flags, which
    Quarkus ranks above environment variables.
    """
    return dict(os.environ)


def _default_cache_dir() -> Path:
    """Jars and unpacked distributions: safe to delete, refetched on the next ``up``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sagalog"


def _default_state_dir() -> Path:
    """Broker data, registry database, logs and pid files: what a restart must keep."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sagalog" / "dev"


class DevStackSettings(BaseSettings):
    """Where the local Kafka and schema registry listen and keep their files.

    Every field is read from ``SAGALOG_DEV_<FIELD>`` (for example
    ``SAGALOG_DEV_KAFKA_PORT=19092``), so two stacks can run side by side with
    different ports and state directories.

    Attributes:
        kafka_port: the listener clients bootstrap from (PLAINTEXT, or SASL_SSL on the
            secure stack), of the first node.
        controller_port: the KRaft controller listener of the first node; only the
            brokers use it.
        node_port_step: node ``i`` of a three-broker stack listens on the first node's
            ports plus ``node_port_step * (i - 1)`` (9092, 9192, 9292 by default).
        mtls_port_offset: the secure stack's mTLS listener is each node's client port
            plus this (9102 for the first node by default).
        metrics_port_offset: each node serves its JMX metrics to Prometheus (requests
            by type, records and bytes per topic: ``kafka-metrics.yaml``) on its client
            port plus this (9404 for the first node by default; 0: not served). An
            offset, not a port, so that every stack and node gets its own.
        kafka_advertised_port: the port the broker tells clients to connect to; 0 means
            ``kafka_port``. Set it when a proxy forwards to the broker (the chaos suite's
            network faults), so that no client bypasses the proxy after bootstrapping.
        registry_port: the Apicurio Registry HTTP port (Confluent API under
            ``/apis/ccompat/v7``).
        registry_management_port: Apicurio's health and metrics port (3.2 and later).
            0 lets the OS pick a free one, so it never collides with another stack.
        cache_dir: downloaded jars and distributions, shared by every stack of the user.
        state_dir: data, logs, pid files and generated configuration of this stack.
        maven_repository_url: where the registry distribution is downloaded from
            (a Maven Central mirror works: the lock pins its sha256). The Kafka jars
            are resolved by ``mvn``, which takes mirrors from ``~/.m2/settings.xml``.
        java_home: a JDK to prefer over the ones found on the machine.
        inherited_java_home: ``JAVA_HOME``, tried after ``java_home``.
        kafka_heap: each broker's ``-Xmx``. 512m holds a busy benchmark's broker; three
            of them plus the registry stay under 2.5 GB of RSS.
        registry_heap: the registry's ``-Xmx``.
        jvm_nice: the niceness the broker, controller and registry JVMs run at.
            Negative puts them ahead of the work that loads them: on an overloaded
            machine a single KRaft node at the default 0 can leave its own broker's
            heartbeat in the controller queue past the session, fence the broker and
            stay unusable (docs/design/incident-history.md). A user who
            may not lower niceness (not root, no ``CAP_SYS_NICE``) gets one line in the
            JVM's log saying so, and the JVM runs at 0.
        jvm_jit: ``quick`` (the default) runs the JVMs on the C1 compiler only, ``full``
            on C1 then C2 as production does. Quick halved a dev stack's JVM CPU: the
            start (broker 11.4 to 5.6 CPU s, registry 16.4 to 8.7) and a module of
            tests (broker 41.6 to 23.7, registry 28.4 to 14.5), C2's compiling costing
            more than its faster code earned in a JVM that lives minutes. ``full``
            for a benchmark whose broker must cost what a production broker does.
        ready_timeout_s: how long ``up`` waits for each service to answer.
        stop_timeout_s: how long ``down`` waits after SIGTERM before SIGKILL.
    """

    model_config = SettingsConfigDict(env_prefix="SAGALOG_DEV_", extra="ignore")

    kafka_port: int = Field(default=9092, ge=1, le=65535)
    controller_port: int = Field(default=9093, ge=1, le=65535)
    node_port_step: int = Field(default=100, ge=1, le=10000)
    mtls_port_offset: int = Field(default=10, ge=1, le=10000)
    metrics_port_offset: int = Field(default=312, ge=0, le=10000)
    kafka_advertised_port: int = Field(default=0, ge=0, le=65535)
    registry_port: int = Field(default=8081, ge=1, le=65535)
    registry_management_port: int = Field(default=0, ge=0, le=65535)
    cache_dir: Path = Field(default_factory=_default_cache_dir)
    state_dir: Path = Field(default_factory=_default_state_dir)
    maven_repository_url: str = "https://repo.maven.apache.org/maven2"
    java_home: Path | None = None
    inherited_java_home: Path | None = Field(
        default=None, validation_alias=AliasChoices("JAVA_HOME", "inherited_java_home")
    )
    kafka_heap: str = "512m"
    registry_heap: str = "512m"
    jvm_nice: int = Field(default=-10, ge=-20, le=19)
    jvm_jit: JvmJit = "quick"
    ready_timeout_s: float = Field(default=120.0, gt=0)
    stop_timeout_s: float = Field(default=30.0, gt=0)

    @field_validator("cache_dir", "state_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        """Absolute, because the paths end up in server.properties and JDBC URLs."""
        return value.expanduser().absolute()

    @field_validator("java_home", "inherited_java_home", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """An exported but empty ``JAVA_HOME=`` means "not set", not the current directory."""
        return None if value == "" else value

    @field_validator("kafka_heap", "registry_heap")
    @classmethod
    def _heap_size(cls, value: str) -> str:
        """Checked here so a typo fails before a JVM refuses to start."""
        if not _HEAP_SIZE.match(value):
            raise ValueError(f"{value!r} is not a JVM heap size such as 512m or 2g")
        return value

    @model_validator(mode="after")
    def _distinct_ports(self) -> DevStackSettings:
        """Two services on one port would fail later with a less helpful message."""
        ports = {
            "kafka_port": self.kafka_port,
            "controller_port": self.controller_port,
            "registry_port": self.registry_port,
        }
        if self.registry_management_port:
            ports["registry_management_port"] = self.registry_management_port
        seen: dict[int, str] = {}
        for name, port in ports.items():
            if port in seen:
                raise ValueError(
                    f"{seen[port]} and {name} are both {port}; give each service its own port"
                )
            seen[port] = name
        return self

    @property
    def bootstrap_servers(self) -> str:
        """The value to export as ``SAGALOG_BOOTSTRAP_SERVERS``."""
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def schema_registry_url(self) -> str:
        """The value to export as ``SAGALOG_SCHEMA_REGISTRY_URL`` (Confluent-compatible API)."""
        return f"http://127.0.0.1:{self.registry_port}/apis/ccompat/v7"
