"""The tracker's clock topic: ticks that say "it is now T; fire what is due".

A tick is a record on ``<tracker app id>-clock`` whose value is the time in epoch
ms as ASCII digits, sent to one partition. A wall-clock tracker ticks its own
partitions every second; with ``clock=virtual`` nothing moves until someone ticks,
which is how tests and the demo let three days pass in a second (``tick_all``, or
``sagalog clock advance``).
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from sagalog.errors import ServiceUnavailableError, TopologyError
from sagalog.settings import ClientSettings


def clock_topic(app_id: str) -> str:
    return f"{app_id}-clock"


def encode_tick(now_ms: int) -> bytes:
    return str(now_ms).encode()


def parse_tick(value: bytes | None) -> int | None:
    """A tick's time; None when ``value`` is not a tick."""
    if not value or not value.isdigit():
        return None
    return int(value)


def _partitions(settings: ClientSettings, topic: str) -> list[int]:
    consumer = Consumer(settings.kafka_config(**{"group.id": "sagalog-clock"}))
    try:
        found = consumer.list_topics(topic, timeout=settings.connect_timeout_s).topics.get(topic)
    finally:
        consumer.close()
    if found is None or found.error is not None or not found.partitions:
        raise TopologyError(
            f"clock topic {topic} does not exist: start the tracker once (it creates it)"
        )
    return sorted(found.partitions)


def last_tick_ms(settings: ClientSettings, topic: str) -> int:
    """The latest time among the last tick of each partition (0 when there is none).

    A topic created a moment ago may have no partition leader yet, or be unknown to
    the broker that answers (on a cluster, ``create_topics`` returns once the
    controller committed the topic, before every broker applied it): retried until
    ``connect_timeout_s``, then the error stands.
    """
    deadline = time.monotonic() + settings.connect_timeout_s
    while True:
        try:
            return _last_tick_ms(settings, topic)
        except TopologyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
        except KafkaException as exc:
            if time.monotonic() > deadline:
                raise ServiceUnavailableError(
                    f"cannot read the last ticks of {topic}: {exc}"
                ) from exc
            time.sleep(0.2)


def _last_tick_ms(settings: ClientSettings, topic: str) -> int:
    consumer = Consumer(
        settings.kafka_config(**{"group.id": "sagalog-clock", "enable.auto.commit": False})
    )
    try:
        latest = 0
        for partition in _partitions(settings, topic):
            tp = TopicPartition(topic, partition)
            low, high = consumer.get_watermark_offsets(tp, timeout=settings.connect_timeout_s)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, high - 1)])
            message = consumer.poll(settings.connect_timeout_s)
            if message is not None and message.error() is None:
                latest = max(latest, parse_tick(message.value()) or 0)
        return latest
    finally:
        consumer.close()


def tick_all(settings: ClientSettings, topic: str, now_ms: int) -> int:
    """Tick every partition of ``topic`` with ``now_ms``; how many partitions."""
    partitions = _partitions(settings, topic)
    producer = Producer(settings.producer_config())
    for partition in partitions:
        producer.produce(topic, value=encode_tick(now_ms), partition=partition)
    if producer.flush(settings.connect_timeout_s):
        raise ServiceUnavailableError(
            f"Kafka at {settings.bootstrap_servers} did not acknowledge the ticks on {topic}"
        )
    return len(partitions)
