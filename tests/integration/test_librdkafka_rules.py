"""Rules of librdkafka that the agent runtime is built on, checked on the real broker.

Each is a behaviour the client's documentation leaves implicit and the runtime would
break on if a release changed it; the runtime's own tests use fakes that follow
these rules.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from sagalog.cluster import connect_admin
from sagalog.settings import ClientSettings

from .project import Project


def _member(
    settings: ClientSettings, group: str, topic: str, *, resume: bool, assigned: list[int]
) -> Consumer:
    """A group member that assigns as ``agents.assignment`` does; ``assigned`` counts
    its assignments."""
    consumer = Consumer(
        settings.kafka_config(
            **{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
    )

    def on_assign(member: Any, partitions: list[TopicPartition]) -> None:
        member.assign(partitions)
        if resume:
            member.resume(partitions)
        assigned.append(len(partitions))

    consumer.subscribe([topic], on_assign=on_assign)
    return consumer


def _poll_until(consumers: list[Consumer], done: Any, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not done():
        assert time.monotonic() < deadline, "the group did not get there within a minute"
        for consumer in consumers:
            consumer.poll(0.1)


def _received_after_handback(project: Project, settings: ClientSettings, resume: bool) -> bool:
    """Pause the only partition, let a second member join and leave (the partition is
    revoked and handed back), produce one record: whether it arrives."""
    topic = project.topic(f"pause-probe-{'resumed' if resume else 'kept'}")
    admin, _ = connect_admin(settings)
    admin.create_topics([NewTopic(topic, 1, settings.replication_factor)])[topic].result(30)
    group = f"{topic}-group"
    seen: list[int] = []
    first = _member(settings, group, topic, resume=resume, assigned=seen)
    _poll_until([first], lambda: seen == [1])
    first.pause([TopicPartition(topic, 0)])
    second = _member(settings, group, topic, resume=resume, assigned=[])
    _poll_until([first, second], lambda: len(seen) >= 2)  # revoked, and handed out again
    second.close()
    _poll_until([first], lambda: len(seen) >= 3 and seen[-1] == 1)  # back with the first
    producer = Producer(settings.producer_config())
    producer.produce(topic, b"after", partition=0)
    producer.flush(30)
    deadline = time.monotonic() + 5.0  # enough for a record on an unpaused partition
    try:
        while time.monotonic() < deadline:
            message = first.poll(0.2)
            if message is not None and message.error() is None:
                return True
        return False
    finally:
        first.close()


def test_a_pause_outlives_a_rebalance_that_hands_the_partition_back(
    project: Project, settings: ClientSettings
) -> None:
    """Why ``Assignment.on_assign`` resumes what it is given: a retry partition paused
    until its head came due stayed paused after such a rebalance, its reason forgotten
    at the revocation (a chaos herd round: deferred records waited ten minutes)."""
    assert not _received_after_handback(project, settings, resume=False)
    assert _received_after_handback(project, settings, resume=True)
