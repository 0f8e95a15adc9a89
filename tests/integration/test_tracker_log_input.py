"""The tracker's input (``services.tracker.log_input``) on the real broker: committed
records only, from the group's committed offsets, each stamped with the assignment it
was read under, and nothing more of a partition once it is let go.
"""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from faust.types import TP

from sagalog.cluster import connect_admin
from sagalog.services.tracker.log_input import LogInput, Record
from sagalog.settings import ClientSettings

from .project import Project

WAIT_S = 30.0  # a bound for a loaded machine; nothing here is timed


def workflow_topic(project: Project, settings: ClientSettings) -> str:
    topic = project.topic("orders.events")
    admin, _ = connect_admin(settings)
    for future in admin.create_topics(
        [NewTopic(topic, num_partitions=2, replication_factor=settings.replication_factor)]
    ).values():
        future.result(timeout=30)
    return topic


def write(
    settings: ClientSettings,
    topic: str,
    values: list[bytes],
    *,
    partition: int,
    commit: bool = True,
) -> None:
    """``values`` to ``partition`` in one transaction, as an agent writes, committed or not."""
    producer = Producer(
        settings.producer_config(**{"transactional.id": f"{topic}-{time.monotonic_ns()}"})
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(
            topic, key=b"wf-1", value=value, partition=partition, headers=[("ce_type", b"T")]
        )
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def reading(settings: ClientSettings, group: str) -> LogInput:
    return LogInput(settings, group=group, client_id=f"{group}-input", capacity=1000)


def test_committed_records_come_in_order_with_their_fields_and_generation(
    project: Project, settings: ClientSettings
) -> None:
    topic = workflow_topic(project, settings)
    write(settings, topic, [b"a", b"b"], partition=0)  # 0-1, marker 2
    write(settings, topic, [b"aborted"], partition=0, commit=False)  # 3, marker 4
    write(settings, topic, [b"c"], partition=0)  # 5, marker 6
    write(settings, topic, [b"other"], partition=1)
    log_input = reading(settings, f"{topic}-tracker")

    async def run() -> tuple[list[Record], tuple[int | None, int | None]]:
        log_input.assign(7, [TP(topic, 0)])
        got: list[Record] = []
        async for record in log_input.records():
            got.append(record)
            if len(got) == 3:
                break
        deadline = time.monotonic() + WAIT_S
        while log_input.position(TP(topic, 0)) != (7, 7) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # the thread looks after each fetch
        return got, log_input.position(TP(topic, 0))

    try:
        got, position = asyncio.run(asyncio.wait_for(run(), WAIT_S * 2))
    finally:
        log_input.stop()

    assert [(r.value, r.offset) for r in got] == [(b"a", 0), (b"b", 1), (b"c", 5)]
    first = got[0]
    assert (first.tp, first.topic, first.partition) == (TP(topic, 0), topic, 0)
    assert (first.key, first.headers, first.generation_id) == (b"wf-1", [("ce_type", b"T")], 7)
    assert abs(first.timestamp - time.time()) < 600  # seconds, as faust's messages
    assert position == (7, 7)  # read past the last marker: caught up
    assert log_input.position(TP(topic, 1)) == (None, None)  # not assigned: unknown


def test_reading_starts_at_the_groups_committed_offset_and_stops_when_let_go(
    project: Project, settings: ClientSettings
) -> None:
    topic = workflow_topic(project, settings)
    group = f"{topic}-tracker"
    write(settings, topic, [b"decided", b"next"], partition=0)  # 0-1
    write(settings, topic, [b"p1"], partition=1)
    committer = Consumer(settings.kafka_config(**{"group.id": group}))
    committer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    committer.close()
    log_input = reading(settings, group)

    async def run() -> tuple[list[Record], list[Record]]:
        log_input.assign(1, [TP(topic, 0), TP(topic, 1)])
        first: list[Record] = []
        async for record in log_input.records():
            first.append(record)
            if len(first) == 2:
                break
        log_input.unassign()
        log_input.assign(2, [TP(topic, 1)])  # partition 0 went to another worker
        await asyncio.to_thread(write, settings, topic, [b"gone"], partition=0)
        await asyncio.to_thread(write, settings, topic, [b"p1 again"], partition=1)
        second: list[Record] = []
        async for record in log_input.records():
            second.append(record)
            if record.value == b"p1 again":
                break
        return first, second

    try:
        first, second = asyncio.run(asyncio.wait_for(run(), WAIT_S * 2))
    finally:
        log_input.stop()

    assert sorted((r.value, r.generation_id) for r in first) == [(b"next", 1), (b"p1", 1)]
    # Partition 1 read again from the group's offset (nothing committed: its start),
    # under the new generation; partition 0 no more.
    assert [(r.value, r.generation_id) for r in second if r.generation_id == 2] == [
        (b"p1", 2),
        (b"p1 again", 2),
    ]
    assert all(r.partition == 1 for r in second if r.generation_id == 2)
    # Read before the thread took the new assignment, "gone" may come stamped with
    # generation 1, which the batches drop; never with 2.
    assert b"gone" not in [r.value for r in second if r.generation_id == 2]


def test_an_empty_partition_is_known_to_be_read_to_its_end(
    project: Project, settings: ClientSettings
) -> None:
    """Its timers may fire: nothing can be waiting in it (``caught_up``)."""
    topic = workflow_topic(project, settings)
    log_input = reading(settings, f"{topic}-tracker")

    async def run() -> tuple[int | None, int | None]:
        log_input.assign(1, [TP(topic, 0)])
        deadline = time.monotonic() + WAIT_S
        while log_input.position(TP(topic, 0)) != (0, 0) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return log_input.position(TP(topic, 0))

    try:
        assert asyncio.run(run()) == (0, 0)
    finally:
        log_input.stop()
