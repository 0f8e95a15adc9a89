"""Read a topic, or a time range of it, decoded, as fast as one process can.

Replay is how sagalog rebuilds state and computes analytics, so its speed bounds how
long an audit or a report takes (``python -m tests.bench.replay`` measures it):

- **Batches.** ``consume(num_messages=...)`` hands over thousands of records per call
  into librdkafka; headers are never parsed, keys and timestamps only when asked.
  Whether a batch crossed the end of a partition's range is asked once per batch
  (the consumer's positions), not of every record.
- **Fetching overlaps decoding** without a thread of ours: librdkafka's own threads
  keep fetching into its queue (``queued.min.messages``) while Python decodes, so
  ``consume`` mostly returns at once. (A Python fetching thread would only add GIL
  hand-offs.)
- **Decoding in runs** (``decoding.BatchDecoder``): one fastavro call per run of
  records with the same schema id, through ``EventCodec``'s cached readers.
- **No cyclic garbage collection while a batch is consumed and decoded**: those
  allocations make no reference cycles, and the collections they trigger cost time
  for nothing (``decoding.cyclic_gc_paused``). The caller's code runs with the
  collector on.

Ranges follow Kafka's time index: from the first record whose timestamp is at or
after ``since_ms`` to the last one before the first at or after ``until_ms``
(``offsets_for_times``), so a range never reads the whole topic. The ends are fixed
when the replay starts: records appended meanwhile are not read.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from sagalog.contracts.codec import EventCodec
from sagalog.errors import ServiceUnavailableError
from sagalog.replay.chunks import ChunkReader, LogRange
from sagalog.replay.decoding import BatchDecoder, ReplayBatch, ReplayStats, cyclic_gc_paused
from sagalog.replay.exceptions import ReplayError
from sagalog.settings import ClientSettings


def replay_consumer_config(settings: ClientSettings, **overrides: Any) -> dict[str, Any]:
    """librdkafka settings for reading a topic through, committing nothing.

    The consumer assigns partitions itself and never commits, so it joins no group
    and moves no service's offsets; the group id is only a name librdkafka requires.
    """
    return settings.kafka_config(
        **{
            "group.id": f"sagalog-replay-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "queued.max.messages.kbytes": 256 * 1024,
            "queued.min.messages": 500_000,
            **overrides,
        }
    )


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """Offsets ``start`` (first read) to ``stop`` (first not read) of one partition."""

    partition: int
    start: int
    stop: int

    @property
    def size(self) -> int:
        return max(0, self.stop - self.start)


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """What a replay reads: a range of offsets per partition of ``topic``."""

    topic: str
    ranges: tuple[PartitionRange, ...]

    @property
    def total(self) -> int:
        """Records in the ranges (an upper bound: transaction markers take offsets too)."""
        return sum(r.size for r in self.ranges)


def plan_replay(
    consumer: Consumer,
    topic: str,
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    timeout_s: float = 10.0,
) -> ReplayPlan:
    """The offsets to read for records timestamped in ``[since_ms, until_ms)``.

    None reads from the oldest record kept, or up to the newest.

    Raises:
        ReplayError: the topic does not exist.
        ServiceUnavailableError: the broker did not answer within ``timeout_s``.
    """
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
        info = metadata.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            raise ReplayError(
                f"topic {topic} does not exist; `sagalog topology plan` lists the declared topics"
            )
        partitions = sorted(info.partitions)
        marks = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            for p in partitions
        }
        starts = _offsets_at(consumer, topic, partitions, since_ms, marks, timeout_s, low=True)
        stops = _offsets_at(consumer, topic, partitions, until_ms, marks, timeout_s, low=False)
    except KafkaException as exc:
        raise ServiceUnavailableError(
            f"reading the offsets of {topic} failed: {exc.args[0].str() if exc.args else exc}"
        ) from exc
    ranges = tuple(PartitionRange(p, starts[p], max(starts[p], stops[p])) for p in partitions)
    return ReplayPlan(topic=topic, ranges=ranges)


def _offsets_at(
    consumer: Consumer,
    topic: str,
    partitions: list[int],
    at_ms: int | None,
    marks: dict[int, Any],
    timeout_s: float,
    *,
    low: bool,
) -> dict[int, int]:
    """Per partition, the first offset timestamped at or after ``at_ms``.

    None: the low watermark (``low``) or the high one. A partition with no record
    at or after ``at_ms`` gets its high watermark: a range starting there is empty.
    """
    ends: dict[int, tuple[int, int]] = {}
    for p in partitions:
        if marks[p] is None:
            raise ServiceUnavailableError(f"no watermark offsets for {topic}/{p} in {timeout_s}s")
        ends[p] = (int(marks[p][0]), int(marks[p][1]))
    if at_ms is None:
        return {p: ends[p][0] if low else ends[p][1] for p in partitions}
    found = consumer.offsets_for_times(
        [TopicPartition(topic, p, at_ms) for p in partitions], timeout=timeout_s
    )
    offsets = {}
    for tp in found:
        if tp.error is not None:
            raise ReplayError(f"looking up {topic}/{tp.partition} by time failed: {tp.error}")
        first, end = ends[tp.partition]
        offsets[tp.partition] = end if tp.offset < 0 else max(first, tp.offset)
    return offsets


class TopicReplay:
    """One pass over a planned range of a topic, decoded in batches.

    Use as a context manager; ``batches()`` yields ``ReplayBatch`` objects until every
    partition reached the end of its range, and ``stats`` counts what was read.
    """

    def __init__(
        self,
        settings: ClientSettings,
        codec: EventCodec,
        topic: str,
        *,
        since_ms: int | None = None,
        until_ms: int | None = None,
        event_types: Collection[str] | None = None,
        batch_size: int = 10_000,
        keys: bool = True,
        timestamps: bool = False,
        logical_types: bool = True,
        idle_timeout_s: float = 30.0,
        consumer_config: dict[str, Any] | None = None,
    ) -> None:
        """Open the consumer and fix the range to read.

        Args:
            settings: how to reach the cluster.
            codec: decodes the records (its registry and catalog).
            topic: what to read.
            since_ms: the first record timestamp to read (None: the oldest kept).
            until_ms: read records timestamped before this (None: up to the newest).
            event_types: decode only these (others are counted as skipped).
            batch_size: records asked of librdkafka per call.
            keys: return the record keys.
            timestamps: return the record timestamps.
            logical_types: decode timestamps as datetimes (as ``EventCodec.decode``
                does) or, when False, leave them as epoch milliseconds.
            idle_timeout_s: give up when nothing arrives for this long before the end.
            consumer_config: librdkafka overrides.

        Raises:
            ReplayError: the topic does not exist.
            ServiceUnavailableError: the broker did not answer.
        """
        self.topic = topic
        self.batch_size = batch_size
        self.idle_timeout_s = idle_timeout_s
        self.decoder = BatchDecoder(
            codec,
            event_types=event_types,
            logical_types=logical_types,
            keys=keys,
            timestamps=timestamps,
        )
        self.consumer = Consumer(replay_consumer_config(settings, **(consumer_config or {})))
        try:
            self.plan = plan_replay(
                self.consumer,
                topic,
                since_ms=since_ms,
                until_ms=until_ms,
                timeout_s=settings.connect_timeout_s,
            )
        except BaseException:
            self.consumer.close()
            raise

    @property
    def stats(self) -> ReplayStats:
        """What was read, decoded, skipped and found undecodable so far."""
        return self.decoder.stats

    def __enter__(self) -> TopicReplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.consumer.close()

    def batches(self, progress: Callable[[int], None] | None = None) -> Iterator[ReplayBatch]:
        """The decoded records, batch by batch; ``progress(n)`` after each ``n`` read."""
        reader = ChunkReader(
            self.consumer,
            [LogRange(self.topic, r.partition, r.start, r.stop) for r in self.plan.ranges],
            chunk_size=self.batch_size,
            idle_timeout_s=self.idle_timeout_s,
        )
        for kept in reader.chunks():
            # No cyclic GC while decoding (see cyclic_gc_paused); the caller's code,
            # between batches, runs with it.
            with cyclic_gc_paused():
                decoded = list(self.decoder.decode(kept))
            self.stats.read += len(kept)
            yield from decoded
            if progress is not None:
                progress(len(kept))
