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

Memory stays bounded however many subjects there are: the catch-up keeps each record's
wrapped bytes in a local RocksDB index (``WrappedKeyIndex``, a temporary directory of
this process, rebuilt from the topic at start: the topic stays the source of truth),
and only the ``cache_keys`` most recently used data keys are kept unwrapped
(``UnwrappedKeys``). A miss is one index lookup and one unwrap, never a re-read of
the topic; a key the index does not hold yet is what sends a reader to the topic.
``sagalog keys rotate`` writes a record under the same topic key with the same data
key wrapped by the new KEK, so compaction drops the old wrapping, and an erasure's
tombstone removes every wrapping of the key at once.

Compaction removes an erased key's record from the brokers' disks: the topic rolls
its segments hourly and compacts them eagerly, so a wrapped key outlives its erasure
on disk by about an hour (plus ``delete.retention.ms`` for the tombstone itself).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from rocksdict import Rdict, WriteOptions

from sagalog.assigned_reader import assigned_consumer, not_ours
from sagalog.authorization import authorization_error, is_authorization_failure
from sagalog.cluster import connect_admin, internal_topic
from sagalog.errors import PersonalDataError, ServiceUnavailableError
from sagalog.personal.keys import KeyService, new_data_key
from sagalog.rocksdb_options import bounded_options
from sagalog.settings import ClientSettings

KEY_TOPIC = "sagalog.personal-keys"
KEY_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": str(3_600_000),
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(86_400_000),
}


class WrappedKeyIndex:
    """Every live data key's wrapped record, by ``<subject>:<key id>``, on local disk.

    A cache of the key topic, not a copy to keep: it lives in a temporary directory
    removed at ``close`` and is filled again from the topic by the next process. RocksDB
    with a 4 MB memtable and an 8 MB block cache keeps a million subjects' records
    (~100 bytes each) in about that much memory plus what the OS caches of the files.
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        self._owned = directory is None
        if directory is None:
            _remove_stale_indexes()
            directory = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
        self.path = Path(directory)
        self.db = Rdict(str(self.path), bounded_options(raw_mode=True))
        self._writes = WriteOptions()
        self._writes.disable_wal = True  # type: ignore[assignment]  # rebuilt from the topic
        # A reader that never closes (a CLI view's codec) still leaves no directory
        # behind: removed when the index is collected or the interpreter exits.
        self._removal = (
            weakref.finalize(self, shutil.rmtree, self.path, True) if self._owned else None
        )

    def put(self, subject: str, key_id: str, wrapped: bytes) -> None:
        self.db.put(_index_key(subject, key_id), wrapped, self._writes)

    def delete(self, subject: str, key_id: str) -> None:
        self.db.delete(_index_key(subject, key_id), self._writes)

    def get(self, subject: str, key_id: str) -> bytes | None:
        value = self.db.get(_index_key(subject, key_id))
        return value if isinstance(value, bytes) else None

    def key_ids(self, subject: str) -> list[str]:
        """The ids of ``subject``'s keys, in order."""
        prefix = f"{subject}:".encode()
        found = []
        for key in self.db.keys(from_key=prefix):
            if not isinstance(key, bytes) or not key.startswith(prefix):
                break
            found.append(key[len(prefix) :].decode())
        return found

    def records(self) -> Iterator[tuple[str, str, bytes]]:
        """Every ``(subject, key id, wrapped)``, in key order."""
        for key, value in self.db.items():
            if isinstance(key, bytes) and isinstance(value, bytes):
                subject, _, key_id = key.decode().partition(":")
                yield subject, key_id, value

    def close(self) -> None:
        self.db.close()
        if self._removal is not None:
            self._removal()


class UnwrappedKeys:
    """The ``capacity`` most recently used data keys, unwrapped: least recent out first."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._keys: OrderedDict[tuple[str, str], bytes] = OrderedDict()

    def get(self, subject: str, key_id: str) -> bytes | None:
        key = self._keys.get((subject, key_id))
        if key is not None:
            self._keys.move_to_end((subject, key_id))
        return key

    def put(self, subject: str, key_id: str, data_key: bytes) -> None:
        self._keys[(subject, key_id)] = data_key
        self._keys.move_to_end((subject, key_id))
        while len(self._keys) > self.capacity:
            self._keys.popitem(last=False)

    def drop(self, subject: str, key_id: str) -> None:
        self._keys.pop((subject, key_id), None)

    def __len__(self) -> int:
        return len(self._keys)


class SubjectKeys:
    """The data keys of every subject, read from and written to the key topic.

    Args:
        cache_keys: how many data keys to keep unwrapped in memory (the rest are
            unwrapped again from the local index when used).
    """

    def __init__(
        self,
        settings: ClientSettings,
        service: KeyService,
        *,
        refresh_s: float = 30.0,
        cache_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.service = service
        self.refresh_s = refresh_s
        self._clock = clock
        self._index: WrappedKeyIndex | None = None
        self._unwrapped = UnwrappedKeys(cache_keys)
        self._lock = threading.Lock()
        self._positions: dict[int, int] = {}
        self._absent: set[tuple[str, str]] = set()
        self._partitions: list[int] = []
        self._read_at: float | None = None
        self.on_tombstone: Callable[[str, str], None] | None = None
        """Called with ``(subject, key id)`` for each tombstone a catch-up reads
        (``sagalog keys rotate`` repairs an erasure it raced with)."""

    @property
    def index(self) -> WrappedKeyIndex:
        """The local index of wrapped keys (made on first use)."""
        if self._index is None:
            self._index = WrappedKeyIndex()
        return self._index

    def writing_key(self, subject: str) -> tuple[str, bytes]:
        """The key id and data key to seal ``subject``'s values with, made and stored
        in the key topic when the subject has none."""
        with self._lock:
            self._fresh()
            key_ids = self.index.key_ids(subject)
            if not key_ids:
                self._catch_up()
                key_ids = self.index.key_ids(subject)
            if key_ids:
                key = self._key(subject, key_ids[0])
                if key is not None:
                    return key_ids[0], key
            key_id, data_key = new_data_key()
            wrapped = self.service.wrap(subject, key_id, data_key)
            self._write([(subject, key_id, wrapped)])
            self.index.put(subject, key_id, wrapped)
            self._unwrapped.put(subject, key_id, data_key)
            return key_id, data_key

    def reading_key(self, subject: str, key_id: str) -> bytes | None:
        """The data key ``key_id`` of ``subject``, or None: erased (or never stored)."""
        with self._lock:
            self._fresh()
            key = self._key(subject, key_id)
            if key is None and (subject, key_id) not in self._absent:
                self._catch_up()
                key = self._key(subject, key_id)
                if key is None:  # erased: not asked of the topic again until the refresh
                    self._absent.add((subject, key_id))
            return key

    def erase(self, subject: str) -> list[str]:
        """Tombstone every key of ``subject`` (each under every KEK that wrapped it: one
        topic key per data key); the ids of the keys it had."""
        with self._lock:
            self._catch_up()
            key_ids = self.index.key_ids(subject)
            if key_ids:
                self._write([(subject, key_id, None) for key_id in key_ids])
                for key_id in key_ids:
                    self._forget(subject, key_id)
            return key_ids

    def catch_up(self) -> None:
        """Read the key topic to its current end now."""
        with self._lock:
            self._catch_up()

    def apply(self, subject: str, key_id: str, wrapped: bytes | None) -> None:
        """Take one record of this service's keys into the index, as a catch-up does:
        what a bench or a test feeds without a broker."""
        if wrapped is None:
            self._forget(subject, key_id)
            if self.on_tombstone is not None:
                self.on_tombstone(subject, key_id)
            return
        self.service.kek_of(wrapped)  # a KEK this service lacks fails here, not at a read
        self.index.put(subject, key_id, wrapped)

    def mark_caught_up(self) -> None:
        """Count the ring as read to the topic's end now: for a ring fed by ``apply``
        (a bench, a test), so the next read asks no broker until ``refresh_s``."""
        self._read_at = self._clock()

    def _key(self, subject: str, key_id: str) -> bytes | None:
        key = self._unwrapped.get(subject, key_id)
        if key is None:
            wrapped = self.index.get(subject, key_id)
            if wrapped is not None:
                key = self.service.unwrap(subject, key_id, wrapped)
                self._unwrapped.put(subject, key_id, key)
        return key

    def _forget(self, subject: str, key_id: str) -> None:
        self.index.delete(subject, key_id)
        self._unwrapped.drop(subject, key_id)

    def close(self) -> None:
        """Remove the local index; each read and write uses a client of its own."""
        if self._index is not None:
            self._index.close()
            self._index = None

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
        self.apply(subject, key_id, message.value())

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

    def write(self, records: Sequence[tuple[str, str, bytes | None]]) -> None:
        """Write ``(subject, key id, wrapped key or None)`` records of this service and
        wait for them (``sagalog keys rotate``); the index learns them at the next
        catch-up."""
        if not self._partitions:
            self._partitions = self._ensure_topic()
        self._write(records)

    def _write(self, records: Sequence[tuple[str, str, bytes | None]]) -> None:
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


_PREFIX = "sagalog-keys-"


def _remove_stale_indexes() -> None:
    """Remove the indexes of processes that died without closing theirs (SIGKILL):
    each is named for its process id."""
    for stale in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        pid = stale.name[len(_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)


def _index_key(subject: str, key_id: str) -> bytes:
    return f"{subject}:{key_id}".encode()


def _parts(key: bytes | None) -> tuple[str, str, str]:
    parts = (key or b"").decode(errors="replace").split(":")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else ("", "", "")
