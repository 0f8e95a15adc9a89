"""The configuration files and command lines of the two JVMs, as pure functions.

Keeping them free of I/O lets the unit tests pin every property the broker and
the registry are started with; a changed default in a new Kafka or Apicurio
release then shows up as a reviewed diff here, not as a surprise at runtime.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sagalog.devstack.credentials import SCRAM_ITERATIONS, SCRAM_MECHANISM, ScramCredential
from sagalog.devstack.layout import KAFKA, LOOPBACK, REGISTRY
from sagalog.devstack.lockfile import RegistryDistribution
from sagalog.devstack.nodes import KafkaNode
from sagalog.devstack.profile import replication_profile
from sagalog.devstack.settings import JvmJit

#: System properties that mark a JVM as started by this stack (see processes.is_ours).
COMPONENT_PROPERTY = "sagalog.dev.component"
STATE_PROPERTY = "sagalog.dev.state"


def identity_flags(*, component: str, state_dir: Path) -> list[str]:
    """JVM flags that let ``status`` and ``down`` recognise their own process.

    A pid file can outlive its process and the pid be reused by something else;
    matching these flags in the process's command line rules that out.
    """
    return [f"-D{COMPONENT_PROPERTY}={component}", f"-D{STATE_PROPERTY}={state_dir}"]


JIT_FLAGS: Mapping[JvmJit, tuple[str, ...]] = {
    "quick": ("-XX:TieredStopAtLevel=1",),
    "full": (),
}
"""What each ``jvm_jit`` setting adds: ``quick`` stops at the C1 compiler."""


def jvm_flags(*, component: str, heap: str, state_dir: Path, jit: JvmJit = "quick") -> list[str]:
    """Flags both JVMs share.

    ``jit`` is the ``jvm_jit`` setting: a dev stack's JVM lives minutes to hours
    under light traffic, and spent about half its CPU in the C2 compiler, whose faster
    code it never ran long enough to earn back (``docs/design/test-suite-times.md``).

    ``ExitOnOutOfMemoryError`` makes a sick JVM die visibly instead of limping;
    ``ErrorFile`` keeps crash reports in the stack's log directory rather than in
    whatever directory the user ran ``up`` from. The GC log (``<component>-gc.log``,
    rotated at 5 x 10 MB, as Kafka's own start script keeps one) tells a pause of the
    whole JVM from a slow thread when a broker stalls on a loaded machine.
    """
    logs = state_dir / "logs"
    return [
        f"-Xmx{heap}",
        "-XX:+ExitOnOutOfMemoryError",
        f"-XX:ErrorFile={logs / f'{component}-hs_err_%p.log'}",
        f"-Xlog:gc,safepoint:file={logs / f'{component}-gc.log'}:time:filecount=5,filesize=10M",
        "-Djava.awt.headless=true",
        *JIT_FLAGS[jit],
        *identity_flags(component=component, state_dir=state_dir),
    ]


@dataclass(frozen=True)
class BrokerTls:
    """What a secure node needs to know of its certificates and super users.

    Attributes:
        keystore: PEM file with the brokers' key and certificate chain.
        truststore: PEM file with the stack's CA certificate.
        super_users: principals the authorizer never checks (the admin, the brokers).
    """

    keystore: Path
    truststore: Path
    super_users: tuple[str, ...]


#: ``CN=budget-agent`` (whatever follows) is ``User:budget-agent``, the SCRAM user's name.
PRINCIPAL_MAPPING_RULES = "RULE:^CN=([^,]+)(,.*)?$/$1/,DEFAULT"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

#: A lone combined node's patience with its own broker, in place of Kafka's 9 s / 60 s.
#: On a loaded machine the broker's heartbeat to the controller of the same JVM can stall
#: for tens of seconds, and the controller then fences its only broker ("its session has
#: timed out"); 30 s of session rides out most such stalls (the stalls:
#: docs/design/incident-history.md). The registration timeout must stay well
#: above the session: a SIGKILLed node restarts with its old registration still alive,
#: is refused (DUPLICATE_BROKER_REGISTRATION) until that session expires, and gives up
#: at the registration timeout (a 10-minute session therefore broke every restart).
#: A quorum keeps the defaults: another broker takes over a fenced one's partitions.
SINGLE_NODE_LIVENESS = {
    "broker.session.timeout.ms": str(30_000),
    "initial.broker.registration.timeout.ms": str(120_000),
}


def kafka_server_properties(
    *,
    node: KafkaNode,
    nodes: tuple[KafkaNode, ...],
    data_dir: Path,
    tls: BrokerTls | None = None,
) -> dict[str, str]:
    """One KRaft broker+controller of a one- or three-node quorum, bound to loopback.

    ``node.advertised_port`` is the port clients are told to use after
    bootstrapping: a proxy in front of the broker (the chaos suite's) sets it, so
    that every connection goes through the proxy.

    Replication factors and min ISR, of the internal topics and of topics created
    without their own, follow the broker count (``replication_profile``): 1/1 for
    one broker, 3/2 for three, as in production. Topics are never auto-created
    because sagalog's topology declares every topic with its partitions and retention.

    The group offsets and transaction state logs roll at 8 MiB instead of 100 MiB:
    compaction never touches the segment being written, and every transaction
    writes to both, so at 100 MiB a busy dev stack keeps gigabytes of both
    uncompacted, which the broker loads at start, slowly and beyond its heap
    (docs/design/incident-history.md).

    With ``tls`` the node has no plaintext listener at all (``secure_listeners``).

    A node alone in its quorum waits longer for its own broker's heartbeats and
    registration (``SINGLE_NODE_LIVENESS``); a quorum keeps Kafka's defaults.
    """
    replicas, min_isr = replication_profile(len(nodes))
    properties = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(
            f"{other.node_id}@{other.host}:{other.controller_port}" for other in nodes
        ),
        **(secure_listeners(node, tls) if tls is not None else plaintext_listeners(node)),
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(min_isr),
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min_isr),
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(min_isr),
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.segment.bytes": str(8 * 1024 * 1024),
        "transaction.state.log.segment.bytes": str(8 * 1024 * 1024),
    }
    if len(nodes) == 1:
        properties |= SINGLE_NODE_LIVENESS
    return properties


def plaintext_listeners(node: KafkaNode) -> dict[str, str]:
    """PLAINTEXT for clients and between brokers, PLAINTEXT for the controllers."""
    return {
        "listeners": (
            f"PLAINTEXT://{node.host}:{node.client_port},"
            f"CONTROLLER://{node.host}:{node.controller_port}"
        ),
        "advertised.listeners": f"PLAINTEXT://{node.host}:{node.advertised_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    }


def secure_listeners(node: KafkaNode, tls: BrokerTls) -> dict[str, str]:
    """TLS on every listener; who may connect is decided by credentials and ACLs.

    - ``CLIENT`` (SASL_SSL, SCRAM-SHA-512): services and people with a password.
    - ``MTLS`` (SSL, client certificate required): services with a certificate from
      the stack's CA; the brokers replicate over it too, as ``User:kafka-broker``.
    - ``CONTROLLER`` (SSL, client certificate required): the quorum, brokers only.

    The server side of SCRAM needs a JAAS entry without credentials; the users live
    in the cluster metadata (seeded by ``kafka-storage format --add-scram``, then
    ``AdminClient.alter_user_scram_credentials``). Deny by default: a principal
    without an ACL can do nothing, except the super users.
    """
    return {
        "listeners": (
            f"CLIENT://{node.host}:{node.client_port},MTLS://{node.host}:{node.mtls_port},"
            f"CONTROLLER://{node.host}:{node.controller_port}"
        ),
        "advertised.listeners": (
            f"CLIENT://{node.host}:{node.advertised_port},MTLS://{node.host}:{node.mtls_port}"
        ),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "MTLS",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,MTLS:SSL,CONTROLLER:SSL",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "listener.name.client.sasl.enabled.mechanisms": SCRAM_MECHANISM,
        f"listener.name.client.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": (
            f"{SCRAM_LOGIN_MODULE} required;"
        ),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.truststore),
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.principal.mapping.rules": PRINCIPAL_MAPPING_RULES,
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(f"User:{name}" for name in tls.super_users),
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


def add_scram_argument(credential: ScramCredential) -> str:
    """StorageTool's ``--add-scram`` value that seeds one SCRAM-SHA-512 user.

    The iteration count is given, not left to the tool's default, so the admin and
    the users ``topology apply --dev-users`` creates share the one ``SCRAM_ITERATIONS``.
    """
    password = credential.password.get_secret_value()
    return (
        f"{SCRAM_MECHANISM}=[name={credential.username},iterations={SCRAM_ITERATIONS},"
        f"password={password}]"
    )


def kafka_format_command(
    *,
    java: Path,
    jar_dir: Path,
    log4j_config: Path,
    properties: Path,
    cluster_id: str,
    scram_users: Sequence[ScramCredential] = (),
) -> list[str]:
    """Format the data directory once; ``--ignore-formatted`` makes a rerun harmless.

    No ``--standalone``: the quorum is given by ``controller.quorum.voters``. Every node
    of a quorum is formatted with the same cluster id. ``scram_users`` (the secure
    stack's admin) are written into the bootstrap metadata, so the first client can
    authenticate before anyone could have created a user; the password is on this
    short-lived command line only, never in a log.
    """
    scram = [arg for user in scram_users for arg in ("--add-scram", add_scram_argument(user))]
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
        *scram,
    ]


@dataclass(frozen=True)
class MetricsAgent:
    """The Prometheus JMX exporter a node runs as its ``-javaagent``.

    Attributes:
        jar: the agent's jar (pinned in the lock with the Kafka classpath).
        config: which beans it reads and how they are named (``kafka-metrics.yaml``).
        port: where it serves ``/metrics``, on loopback.
    """

    jar: Path
    config: Path
    port: int

    @property
    def flag(self) -> str:
        return f"-javaagent:{self.jar}={LOOPBACK}:{self.port}:{self.config}"


def kafka_server_command(
    *,
    java: Path,
    jar_dir: Path,
    log4j_config: Path,
    properties: Path,
    heap: str,
    state_dir: Path,
    component: str = KAFKA,
    metrics: MetricsAgent | None = None,
    jit: JvmJit = "quick",
) -> list[str]:
    """Start one node in the foreground of its own (detached) process.

    ``component`` (``kafka``, ``kafka-<id>``) goes into the identity flags, so each
    node's pid record matches only its own JVM. With ``metrics`` the node serves its
    request and topic counts to Prometheus, which is how the benchmarks count broker
    requests and records per saga.
    """
    return [
        str(java),
        *jvm_flags(component=component, heap=heap, state_dir=state_dir, jit=jit),
        *([metrics.flag] if metrics is not None else []),
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
    logins_file: Path | None = None,
    host: str = LOOPBACK,
) -> dict[str, str]:
    """Apicurio settings: one address (loopback unless placed), SQL storage in an H2 file.

    ``logins_file`` (the secure stack) is a properties file of basic-auth users
    (``registry_login_properties``), read through ``quarkus.config.locations`` so that
    no password is on the command line, which ``ps`` shows and the log records.

    Apicurio 3.x defaults to an in-memory H2 database; pointing
    ``apicurio.datasource.url`` at a file keeps registered schemas across
    ``down``/``up``. ``quarkus.management.enabled`` is fixed at build time in 3.2+,
    so the management port cannot be switched off, only moved (0: any free port).
    """
    properties = {
        "quarkus.http.host": host,
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
    if logins_file is not None:
        properties["quarkus.config.locations"] = str(logins_file)
    if distribution.management_interface:
        properties["quarkus.management.host"] = LOOPBACK
        properties["quarkus.management.port"] = str(management_port)
    return properties


def registry_login_properties(users: Sequence[ScramCredential]) -> dict[str, str]:
    """HTTP basic auth against users embedded in the registry's configuration.

    Apicurio Registry 3.3 builds in Quarkus' embedded user realm
    (``quarkus.security.users.embedded.enabled`` is fixed at build time to true) and
    puts ``basic`` in its authentication chain when ``quarkus.http.auth.basic`` is
    true at run time: no Keycloak or other OIDC provider is involved. Quarkus warns
    that the property is "build time fixed to null"; Apicurio reads it at run time
    anyway: an anonymous request and a wrong password get 401, the right one 200.
    Every user gets ``sr-admin``; role-based authorization stays off, as in
    production's default.
    """
    properties = {
        "quarkus.http.auth.basic": "true",
        "quarkus.security.users.embedded.plain-text": "true",
    }
    for user in users:
        password = user.password.get_secret_value()
        properties[f"quarkus.security.users.embedded.users.{user.username}"] = password
        properties[f"quarkus.security.users.embedded.roles.{user.username}"] = "sr-admin"
    return properties


def registry_command(
    *,
    java: Path,
    home: Path,
    distribution: RegistryDistribution,
    heap: str,
    state_dir: Path,
    system_properties: Mapping[str, str],
    jit: JvmJit = "quick",
) -> list[str]:
    """Start the Quarkus jar; it finds ``lib/`` next to the launcher, whatever the cwd."""
    return [
        str(java),
        *jvm_flags(component=REGISTRY, heap=heap, state_dir=state_dir, jit=jit),
        *(f"-D{key}={value}" for key, value in system_properties.items()),
        "-jar",
        str(home / distribution.launcher),
    ]
