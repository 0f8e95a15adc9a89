"""A transaction the coordinator completed without one partition's commit marker, made on
purpose on a real three-broker cluster, and what ends it (``sagalog.open_transactions``).

The coordinator sends a transaction's markers to each partition's leader and, when it
finds none, takes the partition for deleted and completes the transaction without it
("Couldn't find leader endpoint ... likely deleted already and hence can be skipped").
A partition whose every replica is away when the transaction commits is such a
partition: when it comes back, its records of the transaction stay open, and every
``read_committed`` reader waits at them. That is what the chaos suite's broker restart
did to the tracker's own transaction (CI, stop 35). The tracker and the agents rely on
the broker ending such a range at the same producer's next marker on the partition;
this module checks that rule where it can fail: the records held, then ended,
committed, by a later transaction of the same transactional id.

On the run's three-broker stack (``cluster``, ``tests/stacks.py``), which it leaves
running: the replica must live on a broker other than the transaction's coordinator,
so that one can be killed alone.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from chaos.stack import ChaosStack
from waiting import poll

TRANSACTION_STATE_PARTITIONS = 50  # the broker's transaction.state.log.num.partitions


def coordinator_of(admin: AdminClient, transactional_id: str) -> int:
    """The broker leading the ``__transaction_state`` partition of ``transactional_id``
    (Kafka hashes the id as Java's ``String.hashCode``)."""
    code = 0
    for char in transactional_id:
        code = (31 * code + ord(char)) & 0xFFFFFFFF
    partition = (code & 0x7FFFFFFF) % TRANSACTION_STATE_PARTITIONS
    metadata = admin.list_topics("__transaction_state", timeout=30)
    return int(metadata.topics["__transaction_state"].partitions[partition].leader)


def leader(admin: AdminClient, topic: str) -> int | None:
    """The leader of ``topic``'s partition 0, or None while the metadata does not list the
    partition yet (a topic just created can be known before its partitions are: CI saw it)."""
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    return int(partitions[0].leader) if 0 in partitions else None


def ends(admin: AdminClient, topic: str) -> tuple[int, int]:
    """The partition's last stable offset and its high watermark."""
    tp = TopicPartition(topic, 0)
    return tuple(  # type: ignore[return-value]
        admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level)[tp]  # type: ignore[no-untyped-call]
        .result(30)
        .offset
        for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED)
    )


def test_a_marker_skipped_for_a_leaderless_partition_holds_it_until_the_same_id_commits_there(
    cluster: ChaosStack,
) -> None:
    bootstrap = cluster.stack.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    transactional_id = f"held-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 300_000,
        }
    )
    producer.init_transactions(60)
    coordinator = coordinator_of(admin, transactional_id)
    away = next(b.node_id for b in cluster.brokers() if b.node_id != coordinator)
    topic = f"held.{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[away]])])[topic].result(30)
    poll(
        timeout=90,
        condition=lambda: leader(admin, topic) == away,
        what=f"{topic} led by broker {away}",
    )

    producer.begin_transaction()
    producer.produce(topic, value=b"first", partition=0)
    producer.flush(30)
    cluster.kill_broker(away)
    poll(
        timeout=90,
        condition=lambda: leader(admin, topic) == -1,
        what=f"{topic} leaderless once broker {away} is fenced",
    )
    producer.commit_transaction(60)  # the coordinator finds no leader: no marker for it

    cluster.restart_broker(away)
    poll(
        timeout=90,
        condition=lambda: leader(admin, topic) == away,
        what=f"broker {away} leading {topic} again",
    )
    time.sleep(5)  # a marker in flight would have landed by now
    stable, end = ends(admin, topic)
    assert (stable, end) == (0, 1), "the committed record is held open, nothing can read it"

    producer.begin_transaction()
    producer.produce(topic, value=b"closer", partition=0)
    producer.commit_transaction(60)
    poll(
        timeout=90,
        condition=lambda: ends(admin, topic) == (3, 3),
        what="the range ended by the same id's marker",
    )
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    reader.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 2 and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    reader.close()
    assert values == [b"first", b"closer"]  # committed, as the coordinator had decided
