"""The watchdog's backlog probe on the real broker: what waits, read_committed.

Agents write in transactions, so a tracker that read everything has its committed
offset one short of the log end (the commit marker). The probe must call that
"nothing waiting", and an aborted record too, or an idle tracker would restart
itself every ``stall_timeout_s``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

from sagalog.cluster import connect_admin
from sagalog.services.tracker.backlog import BacklogProbe
from sagalog.services.tracker.settings import TrackerSettings
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
    producer = Producer(settings.producer_config(**{"transactional.id": f"tx-{uuid.uuid4()}"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for n in range(count):
        producer.produce(topic, key=b"wf", value=f"{n}".encode())
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    _wait_for_markers(settings, topic)


def _wait_for_markers(settings: ClientSettings, topic: str) -> None:
    """Wait until the transaction's marker is in the partition.

    ``commit_transaction`` returns once the coordinator decided; it writes the
    markers after. Until then the last stable offset stays before the transaction's
    records, and the probe rightly sees nothing new.
    """
    admin, _ = connect_admin(settings)
    tp = TopicPartition(topic, 0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ends = [
            admin.list_offsets(
                {tp: OffsetSpec.latest()},  # type: ignore[no-untyped-call]
                isolation_level=level,
            )[tp].result(10)
            for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED)
        ]
        if ends[0].offset == ends[1].offset:
            return
        time.sleep(0.05)
    raise AssertionError(f"{topic}: the transaction markers did not land within 30 s")


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


def test_a_read_that_ran_out_of_time_is_not_taken_for_markers(
    settings: ClientSettings, topic: str
) -> None:
    """Issue 45: a read of a stalled span that did not reach its end (a fresh consumer
    on a loaded machine) was remembered as "only markers there", and every later watch
    skipped the span, so the watchdog never handed a stalled worker over."""
    group = f"tracker-{uuid.uuid4().hex[:8]}"
    probe = BacklogProbe(
        TrackerSettings(bootstrap_servers=settings.bootstrap_servers, app_id=group)
    )
    _write(settings, topic, 1, commit=True)  # a record at 0, its marker at 1
    spans = probe.behind([(topic, 0)])
    assert spans == {(topic, 0): (0, 2)}

    assert probe.readable(spans, within_s=0) == set()  # no time to read: nothing known
    assert probe.readable(spans) == {(topic, 0)}  # read again, and the record is there

    _commit(settings, group, topic, 1)  # decided: only the marker is left past the offset
    markers = probe.behind([(topic, 0)])
    assert probe.readable(markers) == set()
    assert probe._unreadable == markers  # read to its end: remembered, not read again
