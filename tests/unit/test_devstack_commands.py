"""The broker's properties and both command lines, pinned as data."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from sagalog.devstack.commands import (
    MetricsAgent,
    kafka_format_command,
    kafka_server_command,
    kafka_server_properties,
    new_cluster_id,
    registry_command,
    registry_system_properties,
    render_properties,
)
from sagalog.devstack.lockfile import RegistryDistribution, load_lock
from sagalog.devstack.nodes import KafkaNode, kafka_nodes
from sagalog.devstack.settings import DevStackSettings
from sagalog.devstack.shape import StackShape
from sagalog.devstack.stack import METRICS_JAR_PREFIX

DATA = Path("/state/kafka/data")
STATE = Path("/state")


def _distribution(*, management: bool) -> RegistryDistribution:
    return RegistryDistribution(
        version="3.3.3",
        min_java=21,
        artifact="io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all",
        file_name="apicurio-registry-app-3.3.3-all.tar.gz",
        sha256="0" * 64,
        launcher="quarkus-run.jar",
        management_interface=management,
    )


def _nodes(brokers: int = 1, **settings: int) -> tuple[KafkaNode, ...]:
    return kafka_nodes(
        DevStackSettings(state_dir=STATE, **settings),  # type: ignore[arg-type]
        StackShape(brokers=brokers),
    )


def test_single_node_kraft_properties_pinned() -> None:
    nodes = _nodes(kafka_port=19092, controller_port=19093)
    assert kafka_server_properties(node=nodes[0], nodes=nodes, data_dir=DATA) == {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:19093",
        "listeners": "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:19092",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(DATA),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Small enough for compaction to keep the logs every transaction writes to small.
        "offsets.topic.segment.bytes": str(8 << 20),
        "transaction.state.log.segment.bytes": str(8 << 20),
        # Alone: the controller fences its only broker after 30 s, not 9 s, without
        # heartbeats; registering may take 120 s, well above that session.
        "broker.session.timeout.ms": "30000",
        "initial.broker.registration.timeout.ms": "120000",
    }


def test_a_proxy_in_front_of_the_broker_is_what_clients_are_told_to_use() -> None:
    nodes = _nodes(kafka_port=29092, controller_port=29093, kafka_advertised_port=29094)
    properties = kafka_server_properties(node=nodes[0], nodes=nodes, data_dir=DATA)
    assert properties["listeners"] == "PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093"
    assert properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:29094"
    assert properties["group.initial.rebalance.delay.ms"] == "0"


def test_render_properties_writes_a_header_and_escapes_backslashes() -> None:
    text = render_properties({"a": "1", "log.dirs": r"C:\data"}, header="generated\nby test")
    assert text == "# generated\n# by test\na=1\nlog.dirs=C:\\\\data\n"


def test_cluster_ids_have_kafkas_uuid_format() -> None:
    for _ in range(200):
        cluster_id = new_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def test_format_does_not_pass_standalone_because_the_voters_are_configured() -> None:
    command = kafka_format_command(
        java=Path("/jdk/bin/java"),
        jar_dir=Path("/cache/kafka/4.4.0"),
        log4j_config=Path("/b/log4j2.properties"),
        properties=Path("/state/kafka/server.properties"),
        cluster_id="abc",
    )
    assert command[:3] == ["/jdk/bin/java", "-cp", "/cache/kafka/4.4.0/*"]
    assert command[-7:] == [
        "kafka.tools.StorageTool",
        "format",
        "--ignore-formatted",
        "-t",
        "abc",
        "-c",
        "/state/kafka/server.properties",
    ]
    assert "--standalone" not in command


def _server_command(**overrides: Any) -> list[str]:
    """A node's server command line, with ``overrides`` over its usual arguments."""
    arguments: dict[str, Any] = {
        "java": Path("/jdk/bin/java"),
        "jar_dir": Path("/cache/kafka/4.4.0"),
        "log4j_config": Path("/b/log4j2.properties"),
        "properties": Path("/state/kafka/server.properties"),
        "heap": "1g",
        "state_dir": STATE,
    }
    return kafka_server_command(**{**arguments, **overrides})


def test_server_command_carries_heap_and_the_flags_that_identify_our_process() -> None:
    command = _server_command()
    assert "-Xmx1g" in command
    assert "-Dsagalog.dev.component=kafka" in command
    assert "-Dsagalog.dev.state=/state" in command
    assert "-Dlog4j2.configurationFile=/b/log4j2.properties" in command
    assert command[-2:] == ["kafka.Kafka", "/state/kafka/server.properties"]


def test_a_dev_jvm_stops_at_c1_unless_asked_for_the_full_jit() -> None:
    assert "-XX:TieredStopAtLevel=1" in _server_command()
    assert not any(flag.startswith("-XX:TieredStopAtLevel") for flag in _server_command(jit="full"))


def test_a_node_with_metrics_runs_the_exporter_agent_on_loopback() -> None:
    agent = MetricsAgent(
        jar=Path("/cache/kafka/4.4.0/jmx_prometheus_javaagent-1.0.1.jar"),
        config=Path("/b/kafka-metrics.yaml"),
        port=9404,
    )
    command = _server_command(metrics=agent)
    flag = (
        "-javaagent:/cache/kafka/4.4.0/jmx_prometheus_javaagent-1.0.1.jar"
        "=127.0.0.1:9404:/b/kafka-metrics.yaml"
    )
    assert command.index(flag) < command.index("kafka.Kafka")  # a JVM option, not an argument


def test_the_exporter_agent_and_its_configuration_ship_with_the_lock() -> None:
    lock = load_lock()
    assert any(name.startswith(METRICS_JAR_PREFIX) for name in lock.kafka.jars)
    config = (lock.base_dir / "kafka-metrics.yaml").read_text(encoding="utf-8")
    assert "kafka_network_requests_total" in config


def test_registry_keeps_schemas_in_an_h2_file_and_listens_on_loopback() -> None:
    properties = registry_system_properties(
        distribution=_distribution(management=True),
        port=18081,
        management_port=0,
        database=Path("/state/registry/3.3.3/db"),
        work_dir=Path("/state/registry/3.3.3"),
    )
    assert properties["apicurio.storage.kind"] == "sql"
    assert properties["apicurio.storage.sql.kind"] == "h2"
    assert properties["apicurio.datasource.url"] == "jdbc:h2:file:/state/registry/3.3.3/db"
    assert properties["quarkus.http.host"] == "127.0.0.1"
    assert properties["quarkus.http.port"] == "18081"
    assert properties["quarkus.management.port"] == "0"
    assert properties["quarkus.management.host"] == "127.0.0.1"


def test_a_placed_registry_serves_its_api_on_that_address_only_and_management_stays_local() -> None:
    properties = registry_system_properties(
        distribution=_distribution(management=True),
        port=34081,
        management_port=0,
        database=Path("/db"),
        work_dir=Path("/w"),
        host="10.231.7.1",
    )
    assert properties["quarkus.http.host"] == "10.231.7.1"
    assert properties["quarkus.management.host"] == "127.0.0.1"


def test_registry_without_management_interface_gets_no_management_flags() -> None:
    properties = registry_system_properties(
        distribution=_distribution(management=False),
        port=8081,
        management_port=9000,
        database=Path("/db"),
        work_dir=Path("/w"),
    )
    assert not any(key.startswith("quarkus.management") for key in properties)


def test_registry_command_runs_the_launcher_with_every_property() -> None:
    command = registry_command(
        java=Path("/jdk25/bin/java"),
        home=Path("/cache/apicurio-registry/3.3.3"),
        distribution=_distribution(management=True),
        heap="512m",
        state_dir=STATE,
        system_properties={"quarkus.http.port": "8081"},
    )
    assert command[0] == "/jdk25/bin/java"
    assert "-Dquarkus.http.port=8081" in command
    assert "-Dsagalog.dev.component=registry" in command
    assert command[-2:] == ["-jar", "/cache/apicurio-registry/3.3.3/quarkus-run.jar"]
