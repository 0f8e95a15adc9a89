"""A three-broker dev stack on the real JVMs: the quorum forms, RF 3 / min ISR 2 holds.

One stack for the module (private ports 27092/27192/27292, registry 27081, a tmp
state dir), stopped at the end: a three-node start costs ~25 s on two cores.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.stack import ChaosStack
from sagalog.cluster import connect_admin
from sagalog.devstack import LocalStack, StartAction
from stacks import cli_environment, client_settings, sagalog


@pytest.fixture
def cluster(cluster: ChaosStack) -> LocalStack:
    """The run's three-broker stack (``tests/stacks.py``), as ``sagalog dev`` drives it."""
    return cluster.stack


def test_three_nodes_form_one_cluster(cluster: LocalStack) -> None:
    settings = client_settings(cluster.client_environment())
    assert settings.bootstrap_servers.count(",") == 2
    _, metadata = connect_admin(settings)
    assert sorted(metadata.brokers) == [1, 2, 3]
    ports = sorted(broker.port for broker in metadata.brokers.values())
    assert ports == sorted(node.client_port for node in cluster.nodes)


def test_a_topic_with_rf_3_and_min_isr_2_takes_acks_all_writes(cluster: LocalStack) -> None:
    settings = client_settings(cluster.client_environment())
    assert (settings.replication_factor, settings.min_insync_replicas) == (3, 2)
    admin = AdminClient(settings.kafka_config())
    name = f"devstack-rf3-{uuid.uuid4().hex[:8]}"
    topic = NewTopic(
        name,
        num_partitions=3,
        replication_factor=settings.replication_factor,
        config={"min.insync.replicas": str(settings.min_insync_replicas)},
    )
    admin.create_topics([topic])[name].result(30)
    partitions = admin.list_topics(name, timeout=15).topics[name].partitions
    assert all(len(p.replicas) == 3 for p in partitions.values())
    delivered: list[object] = []
    producer = Producer(settings.producer_config())
    for index in range(30):
        producer.produce(
            name,
            key=str(index).encode(),
            value=b"x",
            on_delivery=lambda error, _: delivered.append(error),
        )
    assert producer.flush(30) == 0
    assert delivered == [None] * 30
    admin.delete_topics([name])[name].result(30)


def test_status_logs_and_a_repeated_up_cover_every_node(cluster: LocalStack) -> None:
    again = cluster.up()
    assert [start.name for start in again.brokers] == ["kafka-1", "kafka-2", "kafka-3"]
    assert all(start.action is StartAction.ALREADY_RUNNING for start in again.brokers)
    env = cli_environment(cluster)
    status = sagalog("dev", "status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["brokers"] == 3 and report["secure"] is False
    assert set(report["components"]) == {"kafka-1", "kafka-2", "kafka-3", "registry"}
    logs = sagalog("dev", "logs", "kafka-2", "-n", "400", env=env)
    assert logs.returncode == 0
    assert "[KafkaRaftServer nodeId=2] Kafka Server started" in logs.stdout
    unknown = sagalog("dev", "logs", "kafka", env=env)
    assert unknown.returncode == 2 and "kafka-1" in unknown.stderr


def test_the_shape_is_remembered_and_another_one_refused(cluster: LocalStack) -> None:
    env = cli_environment(cluster)
    exports = sagalog("dev", "env", env=env)
    assert exports.returncode == 0
    assert "export SAGALOG_REPLICATION_FACTOR=3\n" in exports.stdout
    refused = sagalog("dev", "up", "--brokers", "1", env=env)
    assert refused.returncode == 3
    assert "created as 3 brokers, plaintext" in refused.stderr
    assert "SAGALOG_DEV_STATE_DIR" in refused.stderr
    assert json.loads(Path(cluster.settings.state_dir, "stack.json").read_text()) == {
        "brokers": 3,
        "secure": False,
    }


def test_kafka_tools_run_against_every_node(cluster: LocalStack) -> None:
    quorum = sagalog(
        "dev",
        "kafka",
        "kafka-metadata-quorum",
        "describe",
        "--status",
        env=cli_environment(cluster),
    )
    assert quorum.returncode == 0, quorum.stderr
    voters = next(line for line in quorum.stdout.splitlines() if line.startswith("CurrentVoters"))
    assert all(f'"id": {node_id}' in voters for node_id in (1, 2, 3))
