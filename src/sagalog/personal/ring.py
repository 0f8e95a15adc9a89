"""Every subject's data keys, shared by all instances through a compacted key topic.

The key topic (``KEY_TOPIC``) holds one record per data key, keyed
``<service id>:<subject id>:<key id>``, its value the key wrapped by the ``KeyService``
that ``service id`` names; records of other key services (another project on the same
cluster) are skipped unread. Each
process reads the topic to its end before its first seal or open, and again when a
key it needs is not known yet or ``refresh_s`` has passed, so a tombstone written by
``sagalog erase`` stops every reader and writer within that time. Writers that race
on a new subject each write a key of their own id: nothing is overwritten, so no
envelope ever loses its key except by erasure.

Compaction removes an erased key's record from the brokers' disks: the topic rolls
its segments hourly and compacts them eagerly, so a wrapped key outlives its erasure
on disk by about an hour (plus ``delete.retention.ms`` for the tombstone itself).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from sagalog.assigned_reader import assigned_consumer, not_ours
from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.cluster import connect_admin, internal_topic
from sagalog.errors import PersonalDataError, ServiceUnavailableError
from sagalog.personal.keys import KeyService, new_data_key
from sagalog.settings import ClientSettings

KEY_TOPIC = "sagalog.personal-keys"
KEY_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": str(3_600_000),
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(86_400_000),
}


class SubjectKeys:
    """The data keys of every subject, read from and written to the key topic."""

    def __init__(
        self,
        settings: ClientSettings,
        service: KeyService,
        *,
        refresh_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.service = service
        self.refresh_s = refresh_s
        self._clock = clock
        self._keys: dict[str, dict[str, bytes]] = {}
        self._lock = threading.Lock()
        self._positions: dict[int, int] = {}
        self._absent: set[tuple[str, str]] = set()
        self._partitions: list[int] = []
        self._read_at: float | None = None

    def writing_key(self, subject: str) -> tuple[str, bytes]:
        """The key id and data key to seal ``subject``'s values with, made and stored
        in the key topic when the subject has none."""
        with self._lock:
            self._fresh()
            keys = self._keys.get(subject)
            if not keys:
                self._catch_up()
                keys = self._keys.get(subject)
            if keys:
                key_id = min(keys)
                return key_id, keys[key_id]
            key_id, data_key = new_data_key()
            self._write([(subject, key_id, self.service.wrap(subject, key_id, data_key))])
            self._keys[subject] = {key_id: data_key}
            return key_id, data_key

    def reading_key(self, subject: str, key_id: str) -> bytes | None:
        """The data key ``key_id`` of ``subject``, or None: erased (or never stored)."""
        with self._lock:
            self._fresh()
            key = self._keys.get(subject, {}).get(key_id)
            if key is None and (subject, key_id) not in self._absent:
                self._catch_up()
                key = self._keys.get(subject, {}).get(key_id)
                if key is None:  # erased: not asked of the topic again until the refresh
                    self._absent.add((subject, key_id))
            return key

    def erase(self, subject: str) -> list[str]:
        """Tombstone every key of ``subject``; the ids of the keys it had."""
        with self._lock:
            self._catch_up()
            key_ids = sorted(self._keys.pop(subject, {}))
            if key_ids:
                self._write([(subject, key_id, None) for key_id in key_ids])
            return key_ids

    def close(self) -> None:
        """Nothing to release: each read and write uses a client of its own."""

    def _fresh(self) -> None:
        if self._read_at is None or self._clock() - self._read_at >= self.refresh_s:
            self._catch_up()

    def _catch_up(self) -> None:
        """Read the key topic from where the last catch-up stopped to its current end.

        A consumer of its own per catch-up, closed after: one kept between catch-ups,
        even paused, wakes for nothing and costs every writer CPU per event
        (``tests.bench.personal_data`` shows it); a catch-up is every ``refresh_s`` and
        on a miss.
        """
        if not self._partitions:
            self._partitions = self._ensure_topic()
        consumer = assigned_consumer(
            self.settings,
            "sagalog-personal-keys",
            **{"fetch.wait.max.ms": 10, "enable.partition.eof": True},
        )
        try:
            consumer.assign(
                [
                    TopicPartition(KEY_TOPIC, p, self._positions.get(p, OFFSET_BEGINNING))
                    for p in self._partitions
                ]
            )
            self._read_to_end(consumer)
        finally:
            consumer.close()
        self._absent.clear()
        self._read_at = self._clock()

    def _read_to_end(self, consumer: Consumer) -> None:
        timeout = self.settings.connect_timeout_s
        ends = {}
        for number in self._partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(KEY_TOPIC, number), timeout=timeout
            )
            if high > max(low, self._positions.get(number, 0)):
                ends[number] = high
        deadline = self._clock() + timeout
        while ends:
            if self._clock() > deadline:
                raise ServiceUnavailableError(
                    f"the key topic {KEY_TOPIC} was not read to its end within {timeout:.0f} s "
                    f"from {self.settings.bootstrap_servers}"
                )
            polled = consumer.poll(0.2)
            if polled is None:
                continue
            message: Message = polled
            self._apply(message)
            at, offset = message.partition(), message.offset()
            if at is None or offset is None:
                continue
            partition: int = at
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                # The end, also when compaction removed the records just below it.
                self._positions[partition] = offset
                ends.pop(partition, None)
            elif error is None:
                self._positions[partition] = offset + 1
                if offset + 1 >= ends.get(partition, 0):
                    ends.pop(partition, None)

    def _apply(self, message: Message) -> None:
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF or not_ours(error):
                return
            if is_authorization_failure(error):
                raise authorization_error(
                    self.settings, error, operation="READ", resource=KEY_TOPIC
                )
            raise PersonalDataError(f"reading the key topic {KEY_TOPIC}: {error.str()}")
        service, subject, key_id = _parts(message.key())
        if service != self.service.service_id:
            return
        value = message.value()
        if value is None:
            self._keys.get(subject, {}).pop(key_id, None)
            if subject in self._keys and not self._keys[subject]:
                del self._keys[subject]
            return
        self._keys.setdefault(subject, {})[key_id] = self.service.unwrap(subject, key_id, value)

    def _ensure_topic(self) -> list[int]:
        admin, metadata = connect_admin(self.settings)
        info = metadata.topics.get(KEY_TOPIC)
        if info is not None and info.error is None:
            return sorted(info.partitions)
        future = admin.create_topics(
            [internal_topic(self.settings, KEY_TOPIC, partitions=1, config=KEY_TOPIC_CONFIG)],
            request_timeout=self.settings.connect_timeout_s,
        )[KEY_TOPIC]
        try:
            future.result(timeout=self.settings.connect_timeout_s)
        except KafkaException as exc:
            if is_authorization_failure(exc.args[0]):
                raise authorization_error(
                    self.settings, exc.args[0], operation="CREATE", resource=KEY_TOPIC
                ) from exc
            if "already exists" not in str(exc).lower():
                raise
        return [0]

    def _write(self, records: list[tuple[str, str, bytes | None]]) -> None:
        """Write ``(subject, key id, wrapped key or None)`` records and wait for them.

        A producer of its own per write, closed after: keys are written once per new
        subject and per erasure, and an idle producer kept for them costs every writer
        CPU per event in wake-ups (``tests.bench.personal_data`` shows it)."""
        producer = Producer(self.settings.producer_config())
        failures: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failures.append(error)

        for subject, key_id, value in records:
            key = f"{self.service.service_id}:{subject}:{key_id}"
            producer.produce(KEY_TOPIC, key=key.encode(), value=value, on_delivery=delivered)
        left = producer.flush(self.settings.connect_timeout_s)
        if failures and is_authorization_failure(failures[0]):
            raise authorization_error(
                self.settings, failures[0], operation="WRITE", resource=KEY_TOPIC
            )
        if failures or left:
            reason = failures[0].str() if failures else "not acknowledged in time"
            raise ServiceUnavailableError(f"writing {len(records)} key(s) to {KEY_TOPIC}: {reason}")


def _parts(key: bytes | None) -> tuple[str, str, str]:
    parts = (key or b"").decode(errors="replace").split(":")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else ("", "", "")
