"""The watchdog's backlog probe on the real broker: what waits, read_committed.

Agents write in transactions, so a tracker that read everything has its committed
offset one short of the log end (the commit marker). The probe must call that
"nothing waiting", and an aborted record too, or an idle tracker would restart
itself every ``stall_timeout_s``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from saga_tracker.backlog import BacklogProbe
from saga_tracker.settings import TrackerSettings
from sagalog.cluster import connect_admin
from sagalog.settings import ClientSettings


@pytest.fixture
def topic(settings: ClientSettings) -> Iterator[str]:
    name = f"backlog.{uuid.uuid4().hex[:10]}"
    admin, _ = connect_admin(settings)
    for future in admin.create_topics([NewTopic(name, num_partitions=1)]).values():
        future.result(timeout=30)
    yield name
    for future in admin.delete_topics([name], request_timeout=30).values():
        future.result(timeout=30)


def _write(settings: ClientSettings, topic: str, count: int, *, commit: bool) -> None:
    producer = Producer(settings.kafka_config(**{"transactional.id": f"tx-{uuid.uuid4()}"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for n in range(count):
        producer.produce(topic, key=b"wf", value=f"{n}".encode())
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def _commit(settings: ClientSettings, group: str, topic: str, offset: int) -> None:
    consumer = Consumer(settings.kafka_config(**{"group.id": group}))
    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


def test_only_committed_records_past_the_groups_offset_are_waiting(
    settings: ClientSettings, topic: str
) -> None:
    group = f"tracker-{uuid.uuid4().hex[:8]}"
    probe = BacklogProbe(
        TrackerSettings(bootstrap_servers=settings.bootstrap_servers, app_id=group)
    )
    assert probe.waiting([(topic, 0)]) == {}  # an empty topic

    _write(settings, topic, 3, commit=True)  # offsets 0-2, the commit marker at 3
    assert probe.waiting([(topic, 0)]) == {(topic, 0): 4}  # nothing committed by the group

    _commit(settings, group, topic, 3)  # all three processed: only the marker is left
    assert probe.waiting([(topic, 0)]) == {}

    _write(settings, topic, 2, commit=False)  # aborted: never delivered to the tracker
    assert probe.waiting([(topic, 0)]) == {}

    _write(settings, topic, 1, commit=True)
    assert (topic, 0) in probe.waiting([(topic, 0)])
