"""The configuration files and command lines of the two JVMs, as pure functions.

Keeping them free of I/O lets the unit tests pin every property the broker and
the registry are started with; a changed default in a new Kafka or Apicurio
release then shows up as a reviewed diff here, not as a surprise at runtime.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from pathlib import Path

from sagalog.devstack.layout import KAFKA, REGISTRY
from sagalog.devstack.lockfile import RegistryDistribution

LOOPBACK = "127.0.0.1"
#: System properties that mark a JVM as started by this stack (see processes.is_ours).
COMPONENT_PROPERTY = "sagalog.dev.component"
STATE_PROPERTY = "sagalog.dev.state"


def identity_flags(*, component: str, state_dir: Path) -> list[str]:
    """JVM flags that let ``status`` and ``down`` recognise their own process.

    A pid file can outlive its process and the pid be reused by something else;
    matching these flags in the process's command line rules that out.
    """
    return [f"-D{COMPONENT_PROPERTY}={component}", f"-D{STATE_PROPERTY}={state_dir}"]


def jvm_flags(*, component: str, heap: str, state_dir: Path) -> list[str]:
    """Flags both JVMs share.

    ``ExitOnOutOfMemoryError`` makes a sick JVM die visibly instead of limping;
    ``ErrorFile`` keeps crash reports in the stack's log directory rather than in
    whatever directory the user ran ``up`` from.
    """
    return [
        f"-Xmx{heap}",
        "-XX:+ExitOnOutOfMemoryError",
        f"-XX:ErrorFile={state_dir / 'logs' / f'{component}-hs_err_%p.log'}",
        "-Djava.awt.headless=true",
        *identity_flags(component=component, state_dir=state_dir),
    ]


def kafka_server_properties(
    *, kafka_port: int, controller_port: int, data_dir: Path, advertised_port: int = 0
) -> dict[str, str]:
    """A single-node KRaft broker+controller bound to the loopback interface.

    ``advertised_port`` (0: ``kafka_port``) is the port clients are told to use after
    bootstrapping: a proxy in front of the broker (the chaos suite's) sets it, so that
    every connection goes through the proxy.

    Replication factors and min ISR of the internal topics are 1 because there
    is one broker; topics are never auto-created because sagalog's topology
    declares every topic with its partitions and retention.

    The group offsets and transaction state logs roll at 8 MiB instead of 100 MiB:
    compaction never touches the segment being written, and every transaction
    writes to both, so at 100 MiB a day of benchmarks left 780 MB of offsets and
    1.2 GB of transaction state uncompacted; the broker loads all of it at start
    (40 s for one offsets partition) and ran out of its heap doing so.
    """
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{LOOPBACK}:{controller_port}",
        "listeners": f"PLAINTEXT://{LOOPBACK}:{kafka_port},CONTROLLER://{LOOPBACK}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{advertised_port or kafka_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.segment.bytes": str(8 * 1024 * 1024),
        "transaction.state.log.segment.bytes": str(8 * 1024 * 1024),
    }


def render_properties(properties: Mapping[str, str], *, header: str) -> str:
    """Java ``.properties`` text; values with backslashes are escaped as Java expects."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for key, value in properties.items():
        escaped = value.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"{key}={escaped}")
    return "\n".join(lines) + "\n"


def new_cluster_id() -> str:
    """A KRaft cluster id in Kafka's own format (``Uuid.randomUuid().toString()``).

    Generated here rather than with ``StorageTool random-uuid`` to save a JVM start
    on the first ``up``: 16 random bytes, URL-safe base64 without padding, never
    starting with ``-`` (which the tool's argument parser would take for a flag).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def kafka_classpath_flags(*, jar_dir: Path, log4j_config: Path) -> list[str]:
    """The classpath (expanded by the JVM itself) and the log4j2 configuration."""
    return ["-cp", str(jar_dir / "*"), f"-Dlog4j2.configurationFile={log4j_config}"]


def kafka_format_command(
    *, java: Path, jar_dir: Path, log4j_config: Path, properties: Path, cluster_id: str
) -> list[str]:
    """Format the data directory once; ``--ignore-formatted`` makes a rerun harmless.

    No ``--standalone``: the quorum is given by ``controller.quorum.voters``.
    """
    return [
        str(java),
        *kafka_classpath_flags(jar_dir=jar_dir, log4j_config=log4j_config),
        "kafka.tools.StorageTool",
        "format",
        "--ignore-formatted",
        "-t",
        cluster_id,
        "-c",
        str(properties),
    ]


def kafka_server_command(
    *,
    java: Path,
    jar_dir: Path,
    log4j_config: Path,
    properties: Path,
    heap: str,
    state_dir: Path,
) -> list[str]:
    """Start the broker in the foreground of its own (detached) process."""
    return [
        str(java),
        *jvm_flags(component=KAFKA, heap=heap, state_dir=state_dir),
        *kafka_classpath_flags(jar_dir=jar_dir, log4j_config=log4j_config),
        "kafka.Kafka",
        str(properties),
    ]


def registry_system_properties(
    *,
    distribution: RegistryDistribution,
    port: int,
    management_port: int,
    database: Path,
    work_dir: Path,
) -> dict[str, str]:
    """Apicurio settings: loopback only, and SQL storage in an H2 file so schemas survive.

    Apicurio 3.x defaults to an in-memory H2 database; pointing
    ``apicurio.datasource.url`` at a file keeps registered schemas across
    ``down``/``up``. ``quarkus.management.enabled`` is fixed at build time in 3.2+,
    so the management port cannot be switched off, only moved (0: any free port).
    """
    properties = {
        "quarkus.http.host": LOOPBACK,
        "quarkus.http.port": str(port),
        "apicurio.storage.kind": "sql",
        "apicurio.storage.sql.kind": "h2",
        "apicurio.datasource.url": f"jdbc:h2:file:{database}",
        "apicurio.datasource.jdbc.initial-size": "2",
        "apicurio.datasource.jdbc.min-size": "2",
        "apicurio.datasource.jdbc.max-size": "20",
        "apicurio.storage.snapshot.location": str(work_dir),
        # One line per HTTP request (readiness probes included) drowns the audit log.
        "quarkus.http.access-log.enabled": "false",
    }
    if distribution.management_interface:
        properties["quarkus.management.host"] = LOOPBACK
        properties["quarkus.management.port"] = str(management_port)
    return properties


def registry_command(
    *,
    java: Path,
    home: Path,
    distribution: RegistryDistribution,
    heap: str,
    state_dir: Path,
    system_properties: Mapping[str, str],
) -> list[str]:
    """Start the Quarkus jar; it finds ``lib/`` next to the launcher, whatever the cwd."""
    return [
        str(java),
        *jvm_flags(component=REGISTRY, heap=heap, state_dir=state_dir),
        *(f"-D{key}={value}" for key, value in system_properties.items()),
        "-jar",
        str(home / distribution.launcher),
    ]
