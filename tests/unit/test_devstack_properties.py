"""Every property of a node of a three-broker stack and of a secure node, pinned."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from sagalog.devstack.commands import (
    SINGLE_NODE_LIVENESS,
    BrokerTls,
    add_scram_argument,
    kafka_format_command,
    kafka_server_properties,
    registry_login_properties,
    registry_system_properties,
)
from sagalog.devstack.credentials import SCRAM_ITERATIONS, ScramCredential
from sagalog.devstack.lockfile import RegistryDistribution
from sagalog.devstack.nodes import kafka_nodes
from sagalog.devstack.settings import DevStackSettings
from sagalog.devstack.shape import StackShape

STATE = Path("/state")
TLS = BrokerTls(
    keystore=Path("/state/security/clients/kafka-broker-keystore.pem"),
    truststore=Path("/state/security/ca.pem"),
    super_users=("admin", "kafka-broker"),
)
COMMON_THREE = {
    "process.roles": "broker,controller",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.segment.bytes": str(8 << 20),
    "transaction.state.log.segment.bytes": str(8 << 20),
}


def _nodes(*, brokers: int, secure: bool):  # type: ignore[no-untyped-def]
    return kafka_nodes(DevStackSettings(state_dir=STATE), StackShape(brokers, secure))


def test_the_second_node_of_three_plaintext_pinned() -> None:
    nodes = _nodes(brokers=3, secure=False)
    data = Path("/state/kafka-2/data")
    assert kafka_server_properties(node=nodes[1], nodes=nodes, data_dir=data) == {
        **COMMON_THREE,
        "node.id": "2",
        "listeners": "PLAINTEXT://127.0.0.1:9192,CONTROLLER://127.0.0.1:9193",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:9192",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data),
    }


def test_the_third_node_of_three_secure_pinned() -> None:
    nodes = _nodes(brokers=3, secure=True)
    data = Path("/state/kafka-3/data")
    assert kafka_server_properties(node=nodes[2], nodes=nodes, data_dir=data, tls=TLS) == {
        **COMMON_THREE,
        "node.id": "3",
        "listeners": ("CLIENT://127.0.0.1:9292,MTLS://127.0.0.1:9302,CONTROLLER://127.0.0.1:9293"),
        "advertised.listeners": "CLIENT://127.0.0.1:9292,MTLS://127.0.0.1:9302",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "MTLS",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,MTLS:SSL,CONTROLLER:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.client.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/state/security/clients/kafka-broker-keystore.pem",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/state/security/ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)(,.*)?$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:admin;User:kafka-broker",
        "log.dirs": str(data),
    }


def test_a_secure_node_has_no_plaintext_listener() -> None:
    for brokers in (1, 3):
        nodes = _nodes(brokers=brokers, secure=True)
        for node in nodes:
            properties = kafka_server_properties(
                node=node, nodes=nodes, data_dir=Path("/d"), tls=TLS
            )
            protocols = properties["listener.security.protocol.map"]
            assert "PLAINTEXT" not in protocols
            assert "PLAINTEXT" not in properties["listeners"]


def test_one_secure_broker_keeps_the_one_broker_profile() -> None:
    nodes = _nodes(brokers=1, secure=True)
    properties = kafka_server_properties(node=nodes[0], nodes=nodes, data_dir=Path("/d"), tls=TLS)
    assert properties["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert properties["listeners"] == (
        "CLIENT://127.0.0.1:9092,MTLS://127.0.0.1:9102,CONTROLLER://127.0.0.1:9093"
    )
    assert (properties["default.replication.factor"], properties["min.insync.replicas"]) == (
        "1",
        "1",
    )


def test_only_a_lone_node_waits_longer_for_its_own_broker() -> None:
    """30 s of session, 120 s to register (a restart waits out the old session); 3: defaults."""
    assert SINGLE_NODE_LIVENESS == {
        "broker.session.timeout.ms": "30000",
        "initial.broker.registration.timeout.ms": "120000",
    }
    for secure in (False, True):
        [alone] = nodes = _nodes(brokers=1, secure=secure)
        tls = TLS if secure else None
        properties = kafka_server_properties(node=alone, nodes=nodes, data_dir=Path("/d"), tls=tls)
        assert properties.items() >= SINGLE_NODE_LIVENESS.items()
        three = _nodes(brokers=3, secure=secure)
        for node in three:
            properties = kafka_server_properties(
                node=node, nodes=three, data_dir=Path("/d"), tls=tls
            )
            assert not properties.keys() & SINGLE_NODE_LIVENESS.keys()


def test_the_admin_is_seeded_at_format_time() -> None:
    admin = ScramCredential(username="admin", password=SecretStr("pw"))
    seeded = f"SCRAM-SHA-512=[name=admin,iterations={SCRAM_ITERATIONS},password=pw]"
    assert add_scram_argument(admin) == seeded
    command = kafka_format_command(
        java=Path("/jdk/bin/java"),
        jar_dir=Path("/jars"),
        log4j_config=Path("/l"),
        properties=Path("/state/kafka/server.properties"),
        cluster_id="abc",
        scram_users=[admin],
    )
    assert command[-2:] == ["--add-scram", seeded]


def test_the_registry_reads_its_logins_from_a_file_not_the_command_line() -> None:
    admin = ScramCredential(username="admin", password=SecretStr("pw"))
    assert registry_login_properties([admin]) == {
        "quarkus.http.auth.basic": "true",
        "quarkus.security.users.embedded.plain-text": "true",
        "quarkus.security.users.embedded.users.admin": "pw",
        "quarkus.security.users.embedded.roles.admin": "sr-admin",
    }
    distribution = RegistryDistribution(
        version="3.3.3",
        min_java=21,
        artifact="a:b:3.3.3:tar.gz:all",
        file_name="f",
        sha256="0" * 64,
        launcher="quarkus-run.jar",
        management_interface=True,
    )
    properties = registry_system_properties(
        distribution=distribution,
        port=8081,
        management_port=0,
        database=Path("/db"),
        work_dir=Path("/w"),
        logins_file=Path("/state/security/registry-users.properties"),
    )
    assert properties["quarkus.config.locations"] == "/state/security/registry-users.properties"
    assert not any(value == "pw" for value in properties.values())
