"""Restoring the tracker's tables at the speed of the log.

faust restores a table by passing every changelog record through its stream machinery:
an event object, the table's callbacks and a RocksDB write for each. A worker replacing
one that held millions of waiting workflows would spend many minutes restoring before it
decides anything (docs/design/tuning-measurements.md). Here librdkafka reads the
changelog partitions in batches of thousands, and each batch goes to the partition's
RocksDB as one ``WriteBatch`` that also holds the offset faust restores from (its
*persisted offset*). faust's own recovery, which runs next, then finds nothing left to
read, and goes on as it always does (seek, resume, standbys).

The result is faust's: records in offset order, a tombstone deletes its key, only
committed records (``read_committed``), up to and including the last committed
record (``restore.TailReader``) and never past it. Records and offset are written
together, so a worker killed in the middle resumes from a consistent point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import rocksdict
from confluent_kafka import Consumer, KafkaError, TopicPartition

from sagalog.errors import ServiceUnavailableError

Position = tuple[str, int]

#: Records taken from librdkafka at a time (and written in one WriteBatch per partition).
BATCH = 10_000
#: Longest wait for a record while a partition is not restored yet.
STALL_S = 30.0
#: How long one take waits to fill a batch: librdkafka waits the whole time for a batch
#: it cannot fill, so a long wait would be paid again at every partition's end.
WAIT_S = 0.05


@dataclass(frozen=True)
class Span:
    """One changelog partition to restore: ``first`` to ``last`` offset included.

    Attributes:
        db: the partition's RocksDB, as faust opened it (raw keys and values).
        offset_key: where faust keeps the partition's persisted offset in ``db``.
    """

    topic: str
    partition: int
    first: int
    last: int
    db: Any
    offset_key: bytes

    @property
    def position(self) -> Position:
        return (self.topic, self.partition)


class ChangelogLoader:
    """Reads changelog partitions into their RocksDBs (blocking: run it in a thread).

    Args:
        config: librdkafka consumer configuration (bootstrap, security, a ``group.id``
            the tracker may use); the group is never joined, nothing is committed.
        clock: monotonic seconds.
    """

    def __init__(self, config: Mapping[str, Any], *, clock: Callable[[], float]) -> None:
        self.config = {
            **config,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",  # a start compacted away: from the log's start
            # Read ahead further than librdkafka's defaults (1 MB a partition per fetch):
            # a restore is a sequential read of everything. Bounded at 64 MB queued.
            "max.partition.fetch.bytes": 8 << 20,
            "fetch.max.bytes": 32 << 20,
            "queued.min.messages": 200_000,
            "queued.max.messages.kbytes": 64 << 10,
            # A fetch past a partition's end waits this long for more (500 ms by
            # default): the end is what the restore waits for, so no waiting there.
            "fetch.wait.max.ms": 10,
        }
        self.clock = clock

    def load(self, spans: Sequence[Span]) -> dict[Position, int]:
        """Restore every span; the offset each partition's RocksDB holds up to now.

        Raises:
            ServiceUnavailableError: no record came for ``STALL_S`` while some
                partition was not restored yet.
        """
        todo = {span.position: span for span in spans if span.first <= span.last}
        if not todo:
            return {}
        consumer = Consumer(self.config)
        try:
            consumer.assign([TopicPartition(t, p, todo[(t, p)].first) for t, p in todo])
            return self._read(consumer, todo)
        finally:
            consumer.close()

    def _read(self, consumer: Any, todo: dict[Position, Span]) -> dict[Position, int]:
        applied: dict[Position, int] = {}
        open_ = set(todo)
        paused: set[Position] = set()
        waited_since = self.clock()
        while open_:
            messages = consumer.consume(BATCH, WAIT_S)
            if messages:
                waited_since = self.clock()
            elif self.clock() - waited_since > STALL_S:
                raise ServiceUnavailableError(
                    f"the tracker's changelogs {sorted(open_)} gave nothing for {STALL_S:g}s "
                    "while restoring; is Kafka reachable?"
                )
            batches: dict[Position, Any] = {}
            for message in messages:
                position = (message.topic(), message.partition())
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        open_.discard(position)  # the committed end, below ``last``
                        continue
                    raise ServiceUnavailableError(f"restoring {position}: {error}")
                span = todo[position]
                offset = message.offset()
                if offset > span.last:
                    open_.discard(position)
                    continue
                batch = batches.get(position)
                if batch is None:
                    batch = batches[position] = rocksdict.WriteBatch(raw_mode=True)
                value = message.value()
                if value is None:
                    batch.delete(message.key())
                else:
                    batch.put(message.key(), value)
                applied[position] = offset
                if offset >= span.last:
                    open_.discard(position)
            for position, batch in batches.items():
                span = todo[position]
                batch.put(span.offset_key, str(applied[position]).encode())
                span.db.write(batch)
            finished = set(todo) - open_ - paused
            if finished:  # fetch nothing more for them
                consumer.pause([TopicPartition(t, p) for t, p in finished])
                paused |= finished
        return applied
